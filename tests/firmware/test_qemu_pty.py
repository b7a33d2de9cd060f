"""`edgekit qemu FIRMWARE --serial pty` (issue 27): the emulated board handed to an external runner.

A pyserial client (the official MLPerf Tiny runner's serial library) opens the printed pty and speaks the runner's
commands to the KWS harness firmware, as the runner does: `name`, `profile`, `db load N` + `db HEX` lines,
`infer N W` (performance mode: two m-lap-us timestamps around N inferences) and, per input, `infer 1 0` +
`results` (accuracy mode). The outputs equal LiteRT BUILTIN_REF's. SIGTERM then stops the emulator: exit 0, no
QEMU and no working folder left.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import numpy as np
import pytest

from tests.conftest import MLPERF, REPO

serial = pytest.importorskip("serial", reason="pyserial is installed with labgrid (requirements.lock)")
pytestmark = pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                                reason="qemu-system-arm or arm-none-eabi-gcc is not installed")
KWS = MLPERF / "kws_ref_model_int8.tflite"
CHUNK = 31  # bytes per `db` line, as the reference runner sends them (DUT._max_bytes)


class RunnerClient:
    """The runner's side of the wire: '%'-terminated commands, answers read up to m-ready."""

    def __init__(self, port: str) -> None:
        self.port = serial.Serial(port, 115200, timeout=0.5)
        self.transcript: List[str] = []

    def command(self, text: str, timeout_s: float = 60.0) -> List[str]:
        self.port.write((text + "%").encode("ascii"))
        lines, buffer, deadline = [], b"", time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            buffer += self.port.read(max(1, self.port.in_waiting))  # returns as soon as bytes are there
            while b"\n" in buffer:
                raw, _, buffer = buffer.partition(b"\n")
                line = raw.decode("ascii", "replace").strip("\r\0")
                if line:
                    lines.append(line)
                    self.transcript.append(line)
                if line == "m-ready":
                    return lines
        raise AssertionError(f"no m-ready after {text!r}; got {lines}")

    def load(self, data: bytes) -> None:
        assert "m-ready" in self.command(f"db load {len(data)}")
        for i in range(0, len(data), CHUNK):
            answer = self.command("db " + data[i:i + CHUNK].hex())
            assert not [a for a in answer if a.startswith("e-[")], answer
        assert any(a.startswith("m-load-done") for a in answer), answer

    def close(self) -> None:
        self.port.close()


def _descendant_qemu(pid: int) -> List[int]:
    from tests.test_signals import cmdline, descendants

    return [p for p in descendants(pid) if "qemu-system-arm" in cmdline(p)]


@pytest.fixture(scope="module")
def kws_harness(tmp_path_factory) -> Path:
    from edgekit.firmware.mlperf import generate_harness_firmware

    out = tmp_path_factory.mktemp("pty") / "kws"
    generate_harness_firmware(KWS, "mps2-an386", out, task="kws", build=True)
    return out


@pytest.mark.slow
def test_runner_commands_over_the_pty_in_performance_and_accuracy_mode(kws_harness, tmp_path):
    from edgekit.run.runners.mcu import litert_reference

    pty_file = tmp_path / "pty.txt"
    qemu: List[int] = []
    proc = subprocess.Popen([sys.executable, "-m", "edgekit.cli", "qemu", str(kws_harness), "--serial", "pty",
                             "--pty-file", str(pty_file)], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not pty_file.is_file() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pty_file.is_file(), proc.communicate(timeout=30)
        pty = pty_file.read_text().strip()
        assert pty.startswith("/dev/pts/")
        qemu = _descendant_qemu(proc.pid)
        assert len(qemu) == 1
        workdir = Path(os.readlink(f"/proc/{qemu[0]}/fd/1")).parent  # QEMU's log file is in its working folder
        assert workdir.name.startswith("ekq-") and workdir.is_dir()
        client = RunnerClient(pty)
        try:
            assert any(re.match(r"^m-name-dut-\[.+\]$", line) for line in client.command("name"))
            profile = client.command("profile")
            assert "m-model-[kws01]" in profile and any(line.startswith("m-profile-[") for line in profile)
            rng = np.random.default_rng(7)
            inputs = [rng.integers(-128, 128, 490, dtype=np.int8) for _ in range(2)]
            # performance mode: infer N W, timed by the device's microsecond timestamps
            client.load(inputs[0].tobytes())
            answer = client.command("infer 20 1")
            laps = [int(m.group(1)) for m in (re.match(r"^m-lap-us-([0-9]+)$", a) for a in answer) if m]
            assert len(laps) == 2 and laps[1] > laps[0], answer
            # accuracy mode: one inference per input, then results; raw outputs equal BUILTIN_REF's
            expected = litert_reference(KWS.read_bytes(), [[x.reshape(1, 49, 10, 1)] for x in inputs])
            for x, reference in zip(inputs, expected):
                client.load(x.tobytes())
                assert "m-ready" in client.command("infer 1 0")
                results = [a for a in client.command("results") if a.startswith("m-results-[")]
                assert len(results) == 1 and len(results[0][len("m-results-["):-1].split(",")) == 12, results
                hexed = [a for a in client.command("outputs") if a.startswith("m-outputs-[")][0]
                assert bytes.fromhex(hexed[len("m-outputs-["):-1]) == reference[0].astype(np.int8).tobytes()
        finally:
            client.close()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert f"UART0: {pty}" in out and "stopping QEMU (SIGTERM)" in out
        assert not Path(f"/proc/{qemu[0]}").exists() or "Z" in (Path(f"/proc/{qemu[0]}") / "stat").read_text().split()[2]
        assert not pty_file.exists() and not workdir.exists()
    finally:  # on a failure: edgekit is SIGKILLed, and QEMU (in its own session) with it, so nothing outlives the test
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
        from tests.test_signals import cmdline

        for pid in qemu:
            if "qemu-system-arm" in cmdline(pid):  # still that QEMU (never a reused pid)
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
