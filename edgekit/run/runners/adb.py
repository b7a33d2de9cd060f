"""Runs on an Android device with adb: push model + inputs + runner script, run it with the device's python,
stream results; thermal status from ``dumpsys thermalservice`` (read on the device by the runner), energy
from the battery's current x voltage sampled over adb.

The device needs a python with numpy and a TFLite runtime on its PATH (e.g. Termux with tflite-runtime, or a
rooted image); ``--remote-python`` names another one. Every adb call is an argument list; the one string the
device's shell reads is built with shlex.quote from our own words, and remote files have fixed names.
"""
from __future__ import annotations

import logging
import re
import secrets
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from edgekit.errors import DeviceError, DeviceNotFoundError, EdgekitError, ToolMissingError
from edgekit.results import Section
from edgekit.run.base import RUNNERS, RunRequest, RunResult, Runner
from edgekit.run.measurement.energy import POWER_MONITORS, SamplingMonitor, open_monitor
from edgekit.run.runners.session import RUNNER_PROCESS_OPTIONS
from edgekit.run.runners.host import choose_runtime
from edgekit.run.inputs import model_file
from edgekit.run.runners.session import RUNNER_SCRIPT, Collector, StreamingProcess, runner_arguments, run_streaming, write_inputs

log = logging.getLogger(__name__)

DEVICE_TMP = "/data/local/tmp"
ADB_DEVICE_GONE = ("no devices/emulators found", "device offline", "device not found", "error: closed")
BATTERY_SYSFS = "/sys/class/power_supply/battery"


# --- parsers of tool output ----------------------------------------------------------------------
def parse_adb_devices(text: str) -> Dict[str, str]:
    """``adb devices`` -> {serial: state} (state: device, offline, unauthorized, ...)."""
    devices = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.startswith(("List of devices", "*")):
            devices[parts[0]] = parts[1]
    return devices


class Battery(Section):
    """``dumpsys battery`` in SI units; None where the phone does not print the figure."""

    level: Optional[float]
    scale: Optional[float]
    status: Optional[float]        # BatteryManager.BATTERY_STATUS_* (2 = charging)
    plugged: List[str]             # AC, USB, Wireless, Dock
    voltage_v: Optional[float]
    temperature_c: Optional[float]
    current_a: Optional[float]     # vendor-specific (Samsung's "current now")


def parse_dumpsys_battery(text: str) -> Battery:
    """``dumpsys battery``: levels, plug state, voltage (mV -> V), temperature (tenths of C -> C) and, where
    the vendor prints it (e.g. Samsung's ``current now``, in mA), the current in A."""
    values: Dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition(":")
        if sep and key and key not in values:
            values[key.strip()] = value.strip()

    def number(key: str) -> Optional[float]:
        try:
            return float(values[key])
        except (KeyError, ValueError):
            return None

    plugged = [kind for kind in ("AC", "USB", "Wireless", "Dock") if values.get(f"{kind} powered") == "true"]
    voltage_mv, temp, current_ma = number("voltage"), number("temperature"), number("current now")
    return Battery(
        level=number("level"), scale=number("scale"), status=number("status"), plugged=plugged,
        voltage_v=voltage_mv / 1000.0 if voltage_mv is not None else None,
        temperature_c=temp / 10.0 if temp is not None else None,
        current_a=current_ma / 1000.0 if current_ma is not None else None,
    )


def parse_power_supply_uevent(text: str) -> Dict[str, str]:
    """``/sys/class/power_supply/battery/uevent`` (``POWER_SUPPLY_KEY=value`` lines; tools such as acc print
    them without the prefix) -> {KEY: value}."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep:
            values[key.removeprefix("POWER_SUPPLY_")] = value.strip()
    return values


def battery_power_w(properties: Dict[str, str]) -> Optional[float]:
    """Battery power from CURRENT_NOW (uA; the sign convention differs between kernels, so its magnitude is
    used) and VOLTAGE_NOW (uV); None when either is missing."""
    try:
        current, voltage = abs(int(properties["CURRENT_NOW"])), int(properties["VOLTAGE_NOW"])
    except (KeyError, ValueError):
        return None
    if voltage <= 0:
        return None
    return current * 1e-6 * voltage * 1e-6


# --- adb --------------------------------------------------------------------------------------------
class Adb:
    def __init__(self, serial: str = "") -> None:
        path = shutil.which("adb")
        if not path:
            raise ToolMissingError("adb", "apt-get install adb (or Android SDK platform-tools)")
        self.adb = path
        self.serial = serial

    def _argv(self, *args: str) -> List[str]:
        return [self.adb, *(["-s", self.serial] if self.serial else []), *args]

    def call(self, *args: str, timeout_s: float = 30.0, what: str = "") -> str:
        try:
            done = subprocess.run(self._argv(*args), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise DeviceError(f"adb {self.serial or ''}: {what or args[0]} did not finish within {timeout_s:g} s",
                              fix="check the USB connection; `adb devices` should list the device as 'device'") from None
        if done.returncode != 0:
            message = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
            if "not found" in message[0] or "offline" in message[0] or "no devices" in message[0]:
                raise DeviceNotFoundError(f"adb: {message[0]}", fix="connect the device and accept the USB debugging prompt")
            raise DeviceError(f"adb {what or args[0]} failed: {message[0]}")
        return done.stdout

    def shell_argv(self, words: Sequence[str]) -> List[str]:
        return self._argv("shell", shlex.join(list(words)))

    def shell(self, words: Sequence[str], *, timeout_s: float = 30.0, what: str = "") -> str:
        return self.call("shell", shlex.join(list(words)), timeout_s=timeout_s, what=what or words[0])

    def choose_device(self) -> str:
        """The given serial if it is attached and ready, else the only attached device."""
        devices = parse_adb_devices(self.call("devices", timeout_s=30, what="listing devices"))
        ready = [s for s, state in devices.items() if state == "device"]
        if self.serial:
            state = devices.get(self.serial)
            if state != "device":
                raise DeviceNotFoundError(
                    f"adb device {self.serial!r} is {state or 'not connected'}; attached: "
                    + (", ".join(f"{s} ({st})" for s, st in devices.items()) or "none"),
                    fix="connect it and accept the USB debugging prompt (an 'unauthorized' device needs that)")
            return self.serial
        if len(ready) != 1:
            raise DeviceNotFoundError(
                f"{len(ready)} Android devices ready over adb ({', '.join(devices) or 'none attached'})",
                fix="connect exactly one device, or name it: --device adb:SERIAL")
        self.serial = ready[0]
        return self.serial


@POWER_MONITORS.register("android-battery")
class AndroidBatteryMonitor(SamplingMonitor):
    """Battery current x voltage read over adb (``cat .../battery/uevent``), about 4 readings/s. The phone
    must run from its battery (unplugged, or charging disabled), else the charger's current is read."""

    name = "android-battery"
    interval_s = 0.25

    def __init__(self, spec: str, options: Dict[str, str]) -> None:
        super().__init__(spec, options)
        self.adb = Adb(options.get("address", ""))
        self.properties: Dict[str, str] = {}

    def open(self) -> None:
        if self.read_power_w() is None:
            raise DeviceError(f"{BATTERY_SYSFS}/uevent has no readable CURRENT_NOW and VOLTAGE_NOW on this device")
        status = self.properties.get("STATUS", "")
        if status == "Charging":
            log.warning("the battery is charging: the measured current is the charger's, not the device's draw")

    def read_power_w(self) -> Optional[float]:
        self.properties = parse_power_supply_uevent(
            self.adb.shell(["cat", f"{BATTERY_SYSFS}/uevent"], timeout_s=5, what="reading the battery"))
        return battery_power_w(self.properties)

    def describe(self) -> str:
        return f"Android battery current_now x voltage_now over adb ({self.adb.serial})"


@RUNNERS.register("adb")
class AdbRunner(Runner):
    kind = "adb"
    options = RUNNER_PROCESS_OPTIONS | {"remote_python", "benchmark_binary", "delegate"}

    def run(self, request: RunRequest) -> RunResult:
        if request.options.benchmark_binary:  # LiteRT's benchmark_model instead of the python runner
            from edgekit.run.runners.adb_benchmark import run_benchmark_model

            return run_benchmark_model(self, request)
        model = model_file(request.artifact)
        request.runtime = choose_runtime(model, request.runtime)
        adb = Adb(self.target.address)
        serial = adb.choose_device()
        conn = self.target.profile.get("connection") if isinstance(self.target.profile.get("connection"), dict) else {}
        python = str(request.options.remote_python or conn.get("python") or "python3")
        remote_dir = f"{DEVICE_TMP}/edgekit-run-{secrets.token_hex(4)}"
        adb.shell(["mkdir", "-p", remote_dir], what="creating a work folder")
        try:
            monitor, energy_note = self._monitor(request, serial)
            with tempfile.TemporaryDirectory(prefix="edgekit-adb-") as work:
                inputs = Path(work) / "inputs.npz"
                write_inputs(inputs, request.inputs)
                remote_model = f"{remote_dir}/model{model.suffix.lower()}"
                for local, remote in ((RUNNER_SCRIPT, f"{remote_dir}/remote_runner.py"), (inputs, f"{remote_dir}/inputs.npz"),
                                      (model, remote_model)):
                    adb.call("push", str(Path(local).resolve()), remote, timeout_s=120, what=f"pushing {Path(local).name}")
            words = [python, "-u", f"{remote_dir}/remote_runner.py",
                     *runner_arguments(request, remote_model, f"{remote_dir}/inputs.npz", dumpsys=True)]

            def classify(process: StreamingProcess, collector: Collector) -> Optional[EdgekitError]:
                from edgekit.run.faults import DISCONNECTED, with_fault

                text = process.stderr_text()
                if any(s in text for s in ADB_DEVICE_GONE) or re.search(r"device '[^']*' not found", text):
                    message = f"adb device {serial} disconnected during the {collector.phase}"
                    return with_fault(DeviceError(f"{message}: {text.splitlines()[-1].strip()}",
                                                  fix="check the USB cable and that the device is unlocked and "
                                                      "authorised (adb devices); results so far were kept"),
                                      DISCONNECTED, message)
                if "not found" in text and not collector.loaded:
                    return ToolMissingError(f"{python} on the Android device",
                                            "install a python with numpy and tflite-runtime on the device (e.g. Termux) "
                                            "or pass --remote-python PATH")
                return None

            result = run_streaming(lambda: StreamingProcess(adb.shell_argv(words), describe=f"the runner on adb device {serial}"),
                                   self.target, request, monitor, classify=classify)
        except EdgekitError as exc:
            partial = getattr(exc, "partial", None)
            pid = (partial.extra.get("device_python") or {}).get("pid") if partial is not None else None
            if pid:
                self._quietly(adb, ["kill", "-9", str(pid)])
            raise
        finally:
            self._quietly(adb, ["rm", "-rf", remote_dir])
        result.extra["adb_serial"] = serial
        if energy_note and result.energy is None:
            result.extra["energy_unavailable_reason"] = energy_note
        try:
            result.extra["battery"] = parse_dumpsys_battery(adb.shell(["dumpsys", "battery"], timeout_s=10)).to_dict()
        except EdgekitError as exc:
            log.debug("dumpsys battery: %s", exc)
        return result

    @staticmethod
    def _monitor(request: RunRequest, serial: str):
        spec = request.options.power_monitor
        if spec:
            return open_monitor(spec), ""
        monitor = AndroidBatteryMonitor("android-battery", {"address": serial})
        try:
            monitor.open()
        except EdgekitError as exc:
            return None, f"battery power not readable over adb ({exc.message})"
        return monitor, ""

    @staticmethod
    def _quietly(adb: Adb, words: List[str]) -> None:
        try:
            adb.shell(words, timeout_s=15)
        except EdgekitError as exc:
            log.warning("adb %s: %s", " ".join(words), exc)
