"""A device that dies, hangs or disconnects mid-run keeps everything measured: run.json with complete: false,
the fault (died with signal N / no reply within T s / disconnected), every inference so far, exit 4.

The faults are real: the test itself kills (SIGKILL) or stops (SIGSTOP) the real qemu-system-arm process, the
real pyserial transport loses its pty, the real runner process under a real sshd is killed."""
import json
import os
import shutil
import signal

import pytest

from edgekit.errors import DeviceError
from tests.conftest import MLPERF

AD_INT8 = MLPERF / "ad_autoencoder_int8.tflite"
needs_qemu = pytest.mark.skipif(not (shutil.which("qemu-system-arm") and shutil.which("arm-none-eabi-gcc")),
                                reason="qemu-system-arm and arm-none-eabi-gcc are needed (apt-get install qemu-system-arm "
                                       "gcc-arm-none-eabi)")
AFTER = 6  # inferences answered before the test strikes


def strike_qemu_after(monkeypatch, sig: int, after: int = AFTER) -> dict:
    """Send ``sig`` to the real QEMU process once it has answered ``after`` inferences (observes QemuSession.infer)."""
    from edgekit.firmware.qemu import QemuSession

    original, seen = QemuSession.infer, {"pid": None}

    def infer(self, inputs, timeout_s=None):
        answer = original(self, inputs, timeout_s)
        seen[id(self)] = seen.get(id(self), 0) + 1  # per session (building the firmware boots it once too)
        if seen[id(self)] == after and seen["pid"] is None:
            seen["pid"] = self.qemu.process.pid
            os.kill(seen["pid"], sig)
        return answer

    monkeypatch.setattr(QemuSession, "infer", infer)
    return seen


def _check_partial(out, kind: str, detail: str) -> dict:
    run = json.loads((out / "run.json").read_text())
    assert run["complete"] is False and detail in run["incomplete_reason"]
    assert run["fault"]["kind"] == kind and detail in run["fault"]["detail"]
    assert run["fault"]["inferences_completed"] == AFTER
    assert run["instructions"]["inferences"] == AFTER and run["instructions_per_inference"] > 0
    exact = run["outputs_bit_exact"]  # every distinct input sample answered before the fault, checked bit for bit
    assert exact["value"] is True and exact["samples"] == len(run["outputs"]) >= 1
    assert "INCOMPLETE RUN" in (out / "report.md").read_text()
    return run


@needs_qemu
@pytest.mark.parametrize("sig,kind,detail", [
    (signal.SIGKILL, "died", "died with signal 9 (SIGKILL)"),
    (signal.SIGSTOP, "hung", "is stopped (SIGSTOP): no reply within 2 s"),
])
def test_qemu_killed_or_stopped_keeps_every_inference(cli, capsys, tmp_path, monkeypatch, sig, kind, detail):
    seen = strike_qemu_after(monkeypatch, sig)
    out = tmp_path / "run"
    code = cli("run", AD_INT8, "--device", "qemu:mps2-an386", "-n", "3000", "--timeout", "2", "--input-limit", "16",
               "-o", out)
    err = capsys.readouterr().err
    assert code == 4, err
    assert "Traceback" not in err and detail in err and f"{AFTER} inference(s) measured before the fault" in err
    assert "speaks the edgekit protocol" not in err  # the fault is QEMU's, not the firmware's protocol
    _check_partial(out, kind, detail)
    with pytest.raises(ProcessLookupError):  # the stopped/killed QEMU was reaped, not left behind
        os.kill(seen["pid"], 0)


@needs_qemu
@pytest.mark.parametrize("sig,kind,detail", [
    (signal.SIGKILL, "disconnected", "disconnected"),
    (signal.SIGSTOP, "hung", "sent no reply within 2 s"),
])
def test_serial_board_that_disconnects_or_hangs(tmp_path, sig, kind, detail):
    """A 'board' on a real serial line: the firmware in QEMU with its UART on a pty, opened with pyserial by the
    serial runner. Killing QEMU closes the line (disconnected); stopping it leaves the line silent (hung)."""
    from edgekit.firmware.boards import load_board
    from edgekit.firmware.generate import cached_firmware
    from edgekit.firmware.qemu import QemuProcess
    from edgekit.run.base import DeviceTarget, RunRequest
    from edgekit.run.inputs import model_inputs, random_inputs
    from edgekit.run.runners.mcu import SerialRunner

    board = load_board("mps2-an386")
    built = cached_firmware(AD_INT8.read_bytes(), board.name, source=str(AD_INT8))
    qemu = QemuProcess(board, built.elf, uart="pty")
    try:
        port = _pty_of(qemu)
        qemu.transport.close()  # the runner opens the port itself, as it would a board's /dev/ttyACM0
        calls = {"n": 0}

        def progress(n):
            calls["n"] += n
            if calls["n"] == AFTER:
                os.kill(qemu.process.pid, sig)

        request = RunRequest(artifact=AD_INT8, inputs=random_inputs(model_inputs(AD_INT8), count=8), iterations=3000,
                             timeout_s=2.0, progress=progress)
        with pytest.raises(DeviceError) as caught:
            SerialRunner(DeviceTarget("serial", port, board.profile, f"serial:{port}")).run(request)
    finally:
        qemu.close()
    error, partial = caught.value, caught.value.partial
    assert detail in error.message.splitlines()[0] and f"serial port {port}" in error.message
    assert partial.complete is False and partial.fault.kind == kind
    assert partial.fault.inferences_completed == AFTER and len(partial.outputs) == AFTER


def _pty_of(qemu) -> str:
    from edgekit.firmware.qemu import PTY_LINE

    return PTY_LINE.search(qemu.log_text()).group(1)


def test_ssh_runner_killed_says_so_and_writes_partial(cli, capsys, tmp_path, kws_int8, sshd, monkeypatch):
    """The runner process on the board (under a real sshd) is killed with SIGKILL during the warm iterations:
    exit 4, run.json with complete: false, the fault, and the iterations measured so far."""
    import psutil

    from edgekit.run.runners import session

    original, state = session.Collector.handle, {"killed": None}

    def handle(self, event):
        original(self, event)
        if event.get("event") == "batch" and len(self.result.latencies_ms) >= 200 and state["killed"] is None:
            pid = int(self.result.extra["device_python"]["pid"])
            state["killed"] = len(self.result.latencies_ms)
            psutil.Process(pid).send_signal(signal.SIGKILL)

    monkeypatch.setattr(session.Collector, "handle", handle)  # observes the real stream to know when to strike
    out = tmp_path / "run"
    code = cli("run", kws_int8, "--device", sshd.device, *sshd.cli_args(), "--sustain", "60", "--window", "1",
               "--timeout", "5", "-o", out)
    err = capsys.readouterr().err
    assert code == 4, err
    assert "Traceback" not in err and "partial results" in err
    run = json.loads((out / "run.json").read_text())
    assert run["complete"] is False and run["fault"]["kind"] in ("died", "disconnected")
    assert run["fault"]["inferences_completed"] >= state["killed"] >= 200
    assert run["latency_ms"]["count"] >= 200


def test_adb_device_that_disappears_is_a_fault(tmp_path, kws_int8, monkeypatch):
    """The real adb client, pointed at a device serial that no adb server knows: once the runner is 'started', the
    shell exits at once with adb's own 'device not found' error; the runner reports a disconnected device (no phone
    here: the hardware run is tests/run/test_run_errors.py::test_adb_hardware_run)."""
    if not shutil.which("adb"):
        pytest.skip("adb is not installed (apt-get install adb)")
    from edgekit.run.runners.adb import Adb, AdbRunner
    from edgekit.run.base import DeviceTarget, RunRequest
    from edgekit.run.inputs import model_inputs, random_inputs

    serial = "edgekit-gone-device"
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", str(_free_port()))  # a private adb server, not the user's
    monkeypatch.setattr(Adb, "choose_device", lambda self: serial)    # the device was there when the run began
    monkeypatch.setattr(Adb, "shell", lambda self, words, **kw: "")   # mkdir/rm on the device
    monkeypatch.setattr(Adb, "call", lambda self, *args, **kw: "")    # pushes
    request = RunRequest(artifact=kws_int8, inputs=random_inputs(model_inputs(kws_int8)), iterations=10, timeout_s=20,
                         options={"startup_timeout_s": 20})
    try:
        with pytest.raises(DeviceError) as caught:
            AdbRunner(DeviceTarget("adb", serial, {}, f"adb:{serial}")).run(request)
    finally:
        import subprocess

        subprocess.run(["adb", "kill-server"], capture_output=True, timeout=30)
    error = caught.value
    assert serial in error.message and error.partial.complete is False
    assert error.partial.fault.kind in ("disconnected", "died")


def _free_port() -> int:
    from tests.run.runtools import free_port

    return free_port()
