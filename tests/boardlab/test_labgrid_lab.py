"""The board lab for real: a labgrid-coordinator and labgrid-exporters on localhost, emulated places whose
bootstrap driver (re)starts QEMU with the firmware (it stands in for a flasher) and whose NetworkSerialPort is
QEMU's UART over TCP. `edgekit run --device labgrid:PLACE` locks, deploys, runs, releases; a second client
waits for the lock; killing the exporter mid-run leaves run.json with complete: false."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, List, Tuple

import pytest

from tests.conftest import MLPERF

if TYPE_CHECKING:
    from tests.boardlab.lab import Lab

labgrid = pytest.importorskip("labgrid", reason="labgrid is pinned in requirements.lock (make install)")

AD_INT8 = MLPERF / "ad_autoencoder_int8.tflite"
needs_qemu = pytest.mark.skipif(not (shutil.which("qemu-system-arm") and shutil.which("arm-none-eabi-gcc")),
                                reason="qemu-system-arm and arm-none-eabi-gcc are needed (apt-get install "
                                       "qemu-system-arm gcc-arm-none-eabi)")
pytestmark = [needs_qemu, pytest.mark.slow]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from tests.boardlab.lab import Lab

    lab = Lab(tmp_path_factory.mktemp("lab"))
    try:
        lab.add_emulated_place("bench-1")
        yield lab
    finally:
        lab.stop()


_CLIENTS: List[Tuple[subprocess.Popen, "Lab"]] = []


def _as_foreground_job() -> None:
    """Ctrl-C must reach the client as in a terminal: a suite started as a background job (`pytest &`) runs with
    SIGINT ignored, and a child would inherit that and ignore the test's SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def edgekit_run(lab, place: str, out: Path, *extra: str) -> subprocess.Popen:
    """`edgekit run` as its own process (a lab client like any other)."""
    cmd = [sys.executable, "-m", "edgekit.cli", "run", str(AD_INT8), "--device", f"labgrid:{place}",
           "--coordinator", lab.address, "-o", str(out), "--input-limit", "4", *extra]
    log = open(out.with_suffix(".log"), "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ),
                            preexec_fn=_as_foreground_job)
    _CLIENTS.append((proc, lab))
    return proc


@pytest.fixture(autouse=True)
def no_client_outlives_its_test():
    """A failed test must not leave a client holding a place for the next ones."""
    yield
    while _CLIENTS:
        proc, lab = _CLIENTS.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
            lab.kill_place_qemus()  # its QEMU runs in its own session and outlives it: stop it now, not at module end


def finish(proc: subprocess.Popen, out: Path, timeout_s: float = 300) -> str:
    proc.wait(timeout=timeout_s)
    return out.with_suffix(".log").read_text()


def wait_until(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_lock_deploy_run_release_matches_qemu(lab, cli, tmp_path):
    # the same firmware straight on QEMU (also builds it into the test session's firmware cache)
    assert cli("run", AD_INT8, "--device", "qemu:mps2-an386", "-n", "4", "--input-limit", "4", "-o", tmp_path / "q") == 0
    direct = json.loads((tmp_path / "q" / "run.json").read_text())
    out = tmp_path / "lab"
    proc = edgekit_run(lab, "bench-1", out, "-n", "4")
    log = finish(proc, out)
    assert proc.returncode == 0, log
    run = json.loads((out / "run.json").read_text())
    assert run["complete"] is True and run["device"]["kind"] == "labgrid"
    exact = run["outputs_bit_exact"]
    assert exact["value"] is True and exact["samples"] == 4 and exact["differing_elements"] == 0
    assert run["instructions"]["inferences"] == 4
    assert run["instructions_per_inference"] == direct["instructions_per_inference"]   # same firmware, same count
    assert [o for o in run["outputs"]] == [o for o in direct["outputs"]]
    lab_info = run["extra"]["labgrid"]
    assert lab_info["place"] == "bench-1" and lab_info["coordinator"] == lab.address and lab_info["bootstrap"] == "qemu"
    drivers = lab_info["environment"]["targets"]["bench-1"]["drivers"]
    assert drivers[0] == {"EdgekitQemuBootstrapDriver": {"board": "mps2-an386"}}
    assert lab.holder("bench-1") is None   # released


def test_busy_place_names_its_holder_after_the_lock_timeout(lab, cli, capsys, tmp_path):
    lab.client("-p", "bench-1", "acquire", user="alice")
    try:
        assert cli("devices", "--coordinator", lab.address) == 0
        listed = capsys.readouterr().out
        assert "labgrid:bench-1" in listed and "board mps2-an386" in listed and "held by" in listed and "/alice" in listed
        out = tmp_path / "busy"
        started = time.monotonic()
        proc = edgekit_run(lab, "bench-1", out, "-n", "2", "--lock-timeout", "1.5")
        log = finish(proc, out)
        assert proc.returncode != 0 and "Traceback" not in log
        assert "place bench-1 is held by" in log and "/alice" in log and "waited 1.5 s" in log
        assert "--lock-timeout" in log   # the fix
        assert time.monotonic() - started < 60
        assert not out.exists()
    finally:
        lab.client("-p", "bench-1", "release", user="alice")


def test_second_client_waits_and_gets_the_place_when_the_first_is_interrupted(lab, tmp_path):
    """The first client holds the place (a long run), the second waits for it; Ctrl-C (SIGINT) ends the first,
    which releases the place on its way out, and the second gets it and runs."""
    first_out, second_out = tmp_path / "first", tmp_path / "second"
    first = edgekit_run(lab, "bench-1", first_out, "-n", "100000")
    wait_until(lambda: lab.holder("bench-1") is not None or first.poll() is not None, 120, "the first client's lock")
    assert first.poll() is None, first_out.with_suffix(".log").read_text()
    second = edgekit_run(lab, "bench-1", second_out, "-n", "2", "--lock-timeout", "240")
    wait_until(lambda: "is held by" in second_out.with_suffix(".log").read_text() or second.poll() is not None, 120,
               "the second client to wait for the place")
    assert second.poll() is None, second_out.with_suffix(".log").read_text()
    waiting_since = time.monotonic()
    first.send_signal(signal.SIGINT)
    first_log = finish(first, first_out, timeout_s=60)
    assert first.returncode == 130 and "Traceback" not in first_log, first_log
    second_log = finish(second, second_out)
    assert second.returncode == 0, second_log
    assert "waiting up to 240 s" in second_log
    second_run = json.loads((second_out / "run.json").read_text())
    assert second_run["complete"] and second_run["outputs_bit_exact"]["value"] is True
    assert second_run["extra"]["labgrid"]["lock_wait_s"] > 0.5
    assert time.monotonic() - waiting_since < 200
    assert lab.holder("bench-1") is None


def test_exporter_killed_mid_run_leaves_an_incomplete_run_and_a_released_place(lab, tmp_path):
    from edgekit.firmware.plugin import parse_counts

    lab.add_emulated_place("bench-2")
    out = tmp_path / "killed"
    proc = edgekit_run(lab, "bench-2", out, "-n", "100000", "--timeout", "5")

    def counted() -> int:   # inferences the emulated board has finished (its QEMU's instruction-count file)
        counts = lab.qemu_count_file("bench-2")
        return len(parse_counts(counts).inferences) if counts is not None and counts.exists() else 0

    wait_until(lambda: counted() >= 3 or proc.poll() is not None, 180, "three inferences on the lab board")
    assert proc.poll() is None, out.with_suffix(".log").read_text()
    lab.kill_exporter("bench-2")
    log = finish(proc, out)
    assert proc.returncode == 4, log
    assert "Traceback" not in log and "lost its resources" in log
    run = json.loads((out / "run.json").read_text())
    assert run["complete"] is False and run["fault"]["kind"] == "disconnected"
    assert "exp-bench-2" in run["fault"]["detail"]
    assert run["fault"]["inferences_completed"] >= 3
    assert run["instructions"]["inferences"] == run["fault"]["inferences_completed"]
    assert run["outputs_bit_exact"]["value"] is True
    assert lab.holder("bench-2") is None   # released even though its exporter is gone
    wait_until(lambda: not lab.place_qemus("bench-2"), 20, "the emulated board's QEMU to stop")


@pytest.mark.parametrize("sig", [signal.SIGTERM], ids=["sigterm"])   # SIGINT (Ctrl-C): the waiting-client test
def test_interrupted_run_releases_the_place_and_stops_the_board(lab, tmp_path, sig):
    from edgekit.firmware.plugin import parse_counts

    out = tmp_path / "interrupted"
    proc = edgekit_run(lab, "bench-1", out, "-n", "100000")

    def answered() -> int:
        counts = lab.qemu_count_file("bench-1")
        return len(parse_counts(counts).inferences) if counts is not None and counts.exists() else 0

    wait_until(lambda: answered() >= 2 or proc.poll() is not None, 180, "two inferences on the lab board")
    assert proc.poll() is None, out.with_suffix(".log").read_text()
    proc.send_signal(sig)
    log = finish(proc, out, timeout_s=60)
    assert proc.returncode == 128 + sig, log        # 143: SIGTERM is reported as itself (edgekit.interrupts)
    assert f"stopped by {signal.Signals(sig).name}" in log and "Traceback" not in log
    assert lab.holder("bench-1") is None            # released on the way out
    wait_until(lambda: not lab.place_qemus("bench-1"), 20, "the emulated board's QEMU to stop")
