"""Bad input and faults: one clear message, a non-zero exit, results measured so far written (marked incomplete)."""
import json
import os
import pty
import shutil
import signal
import socket
import subprocess
import sys

import pytest

from edgekit.errors import DeviceError


def fails(cli, capsys, out, *args, code=2):
    got = cli(*args, "-o", out)
    err = capsys.readouterr().err
    assert got == code, err
    assert "Traceback" not in err
    return err


def test_unknown_device_lists_the_known_ones(cli, capsys, tmp_path, kws_int8):
    out = tmp_path / "run"
    err = fails(cli, capsys, out, "run", kws_int8, "--device", "raspbery-pi-4")
    assert "unknown device 'raspbery-pi-4'" in err and "raspberry-pi-4" in err and "host" in err and "ssh://USER@HOST" in err
    assert not out.exists()


def test_bad_numbers_and_missing_artifact(cli, capsys, tmp_path, kws_int8):
    out = tmp_path / "run"
    err = fails(cli, capsys, out, "run", kws_int8, "--device", "host", "-n", "0", "--window", "0")
    assert "-n must be positive" in err and "--window must be positive" in err
    err = fails(cli, capsys, out, "run", tmp_path / "missing.tflite", "--device", "host")
    assert "missing.tflite" in err and "does not exist" in err
    bad = tmp_path / "notes.tflite"
    bad.write_text("not a model")
    err = fails(cli, capsys, out, "run", bad, "--device", "host")
    assert "notes.tflite" in err and "not a TFLite flatbuffer" in err
    err = fails(cli, capsys, out, "run", kws_int8, "--device", "host", "--runtime", "onnxruntime")
    assert "--runtime onnxruntime cannot run .tflite" in err
    assert not out.exists()


def test_macos_device_elsewhere_is_a_clear_error(cli, capsys, tmp_path, kws_int8):
    if sys.platform == "darwin":
        pytest.skip("this host is a Mac: --device macos runs here")
    err = fails(cli, capsys, tmp_path / "run", "run", kws_int8, "--device", "macos")
    assert "not macOS" in err and "ssh://" in err


def _runner_children():
    import psutil

    return [c for c in psutil.Process().children(recursive=True) if "remote_runner.py" in " ".join(c.cmdline())]


def test_hung_inference_times_out_and_keeps_partial_results(cli, capsys, tmp_path, kws_int8, monkeypatch):
    """The runner process stops answering mid-run (SIGSTOP: a hang, not a crash): after --timeout the run
    ends with exit 4, run.json keeps the measured iterations and says the run is incomplete."""
    from edgekit.run.runners import session

    stopped = {}
    original = session.Collector.handle

    def handle(self, event):
        original(self, event)
        if event.get("event") == "batch" and len(self.result.latencies_ms) >= 500 and not stopped:
            (child,) = _runner_children()
            child.send_signal(signal.SIGSTOP)
            stopped["proc"] = child

    monkeypatch.setattr(session.Collector, "handle", handle)  # only observes the real stream to know when to stop the child
    out = tmp_path / "run"
    err = fails(cli, capsys, out, "run", kws_int8, "--device", "host", "--sustain", "60", "--window", "1", "--timeout", "1.5",
                code=4)
    assert "sent nothing for 1.5 s during the warm iterations" in err and "partial results" in err
    run = json.loads((out / "run.json").read_text())
    assert run["complete"] is False and "sent nothing" in run["incomplete_reason"]
    assert run["latency_ms"]["count"] >= 500 and run["cold_start_ms"]["load"] > 0
    assert run["energy_uj_per_inference"]["method"] == "unavailable" and "did not complete" in run["energy_uj_per_inference"]["reason"]
    assert "INCOMPLETE RUN" in (out / "report.md").read_text()
    assert not stopped["proc"].is_running() or stopped["proc"].status() == "zombie"


def test_power_monitor_that_returns_nothing(cli, capsys, tmp_path, kws_int8):
    """A PPK2 spec pointing at a real serial port (a pseudo-terminal) whose far end never answers."""
    controller, device = pty.openpty()
    try:
        port = os.ttyname(device)
        out = tmp_path / "run"
        err = fails(cli, capsys, out, "run", kws_int8, "--device", "host", "--power-monitor", f"ppk2:{port}", code=4)
        assert f"the PPK2 on {port} returned nothing" in err and "Fix:" in err
        assert not out.exists()
    finally:
        os.close(controller)
        os.close(device)


def test_power_monitor_spec_errors(cli, capsys, tmp_path, kws_int8):
    out = tmp_path / "run"
    err = fails(cli, capsys, out, "run", kws_int8, "--device", "host", "--power-monitor", "fluke")
    assert "unknown power monitor 'fluke'" in err and "ppk2" in err and "rapl" in err and "ina219" in err
    err = fails(cli, capsys, out, "run", kws_int8, "--device", "host", "--power-monitor", "joulescope")
    assert "joulescope is not installed" in err and "pip install joulescope" in err
    err = fails(cli, capsys, out, "run", kws_int8, "--device", "host", "--power-monitor", "ina219:one@0x40")
    assert "BUS@ADDR" in err
    err = fails(cli, capsys, out, "run", kws_int8, "--device", "host", "--power-monitor", "ina226:99@0x40,shunt_ohm=0.01")
    assert "no INA226 answers on I2C bus 99 at 0x40" in err and "i2cdetect" in err
    if not os.path.exists("/sys/class/powercap"):
        err = fails(cli, capsys, out, "run", kws_int8, "--device", "host", "--power-monitor", "rapl")
        assert "no RAPL powercap counters" in err
    assert not out.exists()


def test_ina2xx_hwmon_on_this_host():
    """The ina2xx hwmon driver's real sysfs files, when this machine has such a sensor (it has none)."""
    from pathlib import Path

    from edgekit.run.measurement.monitors import Ina219Monitor

    found = [p.parent for p in Path("/sys/class/hwmon").glob("hwmon*/name") if p.read_text().strip().startswith("ina2")]
    if not found:
        pytest.skip("no INA219/INA226 hwmon device on this host (/sys/class/hwmon has no ina2xx)")
    monitor = Ina219Monitor(f"ina219:hwmon={found[0]}", {"hwmon": str(found[0])})
    monitor.open()
    value = monitor.read_power_w()
    assert value is not None and value >= 0


@pytest.fixture
def adb_server():
    """adb starts a server daemon on first use; stop it afterwards if this test started it."""
    if not shutil.which("adb"):
        pytest.skip("adb is not installed (apt-get install adb)")
    with socket.socket() as s:
        running = s.connect_ex(("127.0.0.1", 5037)) == 0
    yield
    if not running:
        subprocess.run(["adb", "kill-server"], capture_output=True, timeout=30)


def test_adb_without_a_device(cli, capsys, tmp_path, kws_int8, adb_server):
    from edgekit.run.runners.adb import Adb, parse_adb_devices

    attached = parse_adb_devices(Adb().call("devices"))
    out = tmp_path / "run"
    err = fails(cli, capsys, out, "run", kws_int8, "--device", "adb:edgekit-no-such-device")
    assert "adb device 'edgekit-no-such-device' is not connected" in err
    if not attached:
        err = fails(cli, capsys, out, "run", kws_int8, "--device", "adb")
        assert "0 Android devices ready over adb" in err and "adb:SERIAL" in err
    assert not out.exists()


def test_adb_hardware_run(cli, tmp_path, kws_int8, adb_server):
    """A real Android device: runs only when one is attached and ready (and has a python with LiteRT)."""
    from edgekit.run.runners.adb import Adb, parse_adb_devices

    ready = [s for s, state in parse_adb_devices(Adb().call("devices")).items() if state == "device"]
    if not ready:
        pytest.skip("no Android device attached (adb devices lists none ready)")
    out = tmp_path / "run"
    assert cli("run", kws_int8, "--device", f"adb:{ready[0]}", "-n", "20", "-o", out) == 0
    run = json.loads((out / "run.json").read_text())
    assert run["complete"] and run["latency_ms"]["count"] == 20
    assert run["energy_uj_per_inference"]["method"] in ("measured", "unavailable")


def test_device_error_keeps_partial_in_python_api(tmp_path, kws_int8):
    """The same fault through the Python API: the DeviceError carries the partial RunResult."""
    from edgekit.run.base import DeviceTarget, RunRequest
    from edgekit.run.runners.host import HostRunner
    from edgekit.run.inputs import model_inputs, random_inputs

    def progress(n, seen={"n": 0}):
        seen["n"] += n
        if seen["n"] >= 300 and "done" not in seen:
            seen["done"] = True
            for child in _runner_children():
                child.kill()  # the device vanishes: the process dies mid-run

    request = RunRequest(artifact=kws_int8, inputs=random_inputs(model_inputs(kws_int8)), sustain_s=60, timeout_s=10,
                         options={"threads": 1}, progress=progress)
    with pytest.raises(DeviceError) as caught:
        HostRunner(DeviceTarget("host", "", {}, "host")).run(request)
    assert "stopped during the warm iterations" in caught.value.message
    assert caught.value.partial.complete is False and len(caught.value.partial.latencies_ms) >= 300
