"""`--ray-address` is bounded (issue 27): an address that accepts the TCP connection but never answers, closes at
once, or answers as something else than gRPC fails within seconds for parity and calib-check (each listener runs
on 127.0.0.1 in this process); a real Ray GCS address passes the same check."""
from __future__ import annotations

import socket
import threading
from typing import Callable, Iterator

import numpy as np
import pytest

from tests.conftest import DEMO_MODEL, MLPERF


class Listener:
    """A 127.0.0.1 TCP server that does ``behave(conn)`` with every connection; stopped by close()."""

    def __init__(self, behave: Callable[[socket.socket], None]) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.held = []
        self.behave = behave
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            self.behave(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def _silent(conn: socket.socket) -> None:
    pass  # keep it open, never answer


def _closes(conn: socket.socket) -> None:
    conn.close()


def _http1(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


CASES = [
    pytest.param(_silent, "accepts the connection but sent no answer", id="accepts-never-answers"),
    pytest.param(_closes, "closes it without an answer", id="accepts-then-closes"),
    pytest.param(_http1, "not as a Ray (gRPC) server does", id="http1-server"),
]


@pytest.fixture
def listener(request) -> Iterator[Listener]:
    server = Listener(request.param)
    yield server
    server.close()


def _bounded(fn: Callable[[], int]) -> int:
    """fn() in a thread; a hang (the bug) fails the test instead of stalling the suite."""
    result = []
    thread = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    thread.start()
    thread.join(120)
    assert result, "the command did not return: the cluster connection is not bounded"
    return result[0]


@pytest.mark.parametrize("listener,why", [(c.values[0], c.values[1]) for c in CASES], ids=[c.id for c in CASES],
                         indirect=["listener"])
def test_parity_fails_in_seconds_naming_the_address(listener, why, cli, capsys):
    address = f"127.0.0.1:{listener.port}"
    code = _bounded(lambda: cli("parity", MLPERF / "kws_ref_model_float32.tflite", MLPERF / "kws_ref_model_int8.tflite",
                                "--data", "unused.npy", "--ray-address", address))
    err = capsys.readouterr().err
    assert code == 2 and f"cannot reach the Ray cluster at {address}" in err and why in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("listener", [_silent], indirect=True, ids=["accepts-never-answers"])
def test_calib_check_fails_in_seconds_and_writes_nothing(listener, cli, capsys, tmp_path):
    np.save(tmp_path / "calib.npy", np.zeros((4, 1, 8, 8), np.float32))
    address = f"ray://127.0.0.1:{listener.port}"
    code = _bounded(lambda: cli("calib-check", "--model", DEMO_MODEL, "--calib", tmp_path / "calib.npy", "--live",
                                tmp_path / "calib.npy", "--ray-address", address, "-o", tmp_path / "out"))
    err = capsys.readouterr().err
    assert code == 2 and f"cannot reach the Ray cluster at {address}" in err and "no answer" in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_real_ray_gcs_address_passes_the_check(local_ray):
    import ray

    from edgekit.scale.ray_parity import check_reachable

    check_reachable(ray.get_runtime_context().gcs_address)  # raises UserError if the real GCS did not answer


@pytest.mark.slow
def test_a_local_ray_run_leaves_no_session_folder(tmp_path):
    """`parity --ray` in a fresh process (its own local Ray) with RAY_TMPDIR in a short /tmp folder (Ray's unix
    socket paths must stay short): afterwards no session_* folder or session_latest link is left there."""
    import os
    import shutil
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from tests.conftest import REPO

    x = np.random.default_rng(3).normal(0, 20, (6, 49, 10, 1)).astype(np.float32)
    np.save(tmp_path / "kws.npy", x)
    ray_tmp = Path(tempfile.mkdtemp(prefix="ekr-", dir="/tmp"))
    try:
        env = {**os.environ, "RAY_TMPDIR": str(ray_tmp), "TMPDIR": str(ray_tmp), "PYTHONPATH": str(REPO),
               "RAY_USAGE_STATS_ENABLED": "0"}
        done = subprocess.run([sys.executable, "-m", "edgekit.cli", "parity", MLPERF / "kws_ref_model_float32.tflite",
                               MLPERF / "kws_ref_model_int8.tflite", "--data", tmp_path / "kws.npy", "--ray"],
                              env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
        assert done.returncode in (0, 1), done.stderr
        assert "ran on ray (local)" in done.stdout, done.stdout + done.stderr
        assert (ray_tmp / "ray").is_dir()  # Ray did use this folder
        left = sorted(p.name for p in (ray_tmp / "ray").iterdir() if p.name.startswith("session_"))
        assert not left, left
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
