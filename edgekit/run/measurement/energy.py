"""Energy per inference: always ``{value, method, source}`` with method measured | estimated | unavailable.

- measured: a power monitor ran during the warm iterations (Linux RAPL package counters, Nordic PPK2,
  Joulescope, INA219/INA226, Android battery current x voltage); value = energy over the warm phase /
  iterations. Whole-device (or whole-package) energy: idle power and other processes are included.
- estimated: the device profile's ``power_model`` (idle and full-load power of the board, with its source)
  times the measured time per inference; the model and its numbers are written next to the value.
- unavailable: neither; ``reason`` says what was missing.
"""
from __future__ import annotations

import glob
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from edgekit.profiles import Profile
from edgekit.errors import DeviceError, UserError
from edgekit.registry import Registry
from edgekit.results import Figure
from edgekit.results import figure

log = logging.getLogger(__name__)

POWERCAP_ROOT = Path("/sys/class/powercap")


def measured(value_uj: float, source: str, **details: Any) -> Figure:
    return figure.measured(value_uj, "uJ", source, **details)


def estimated(value_uj: float, source: str, **details: Any) -> Figure:
    return figure.estimated(value_uj, "uJ", source, **details)


def unavailable(reason: str) -> Figure:
    return figure.unavailable(reason, "uJ")


# --- monitors ------------------------------------------------------------------------------------
@dataclass
class PowerMeasurement:
    joules: float
    seconds: float
    samples: int
    source: str

    @property
    def average_w(self) -> float:
        return self.joules / self.seconds if self.seconds > 0 else float("nan")


class PowerMonitor:
    """A power or energy meter read from the host during the warm iterations."""

    name = ""

    def __init__(self, spec: str, options: Dict[str, str]) -> None:
        self.spec = spec
        self.options = options

    def open(self) -> None:
        """Connect and check the meter answers; raise ToolMissingError / DeviceNotFoundError / DeviceError."""

    def begin(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def measurement(self) -> PowerMeasurement:
        """Energy between begin() and stop(); DeviceError if the meter gave nothing."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the meter (safe to call more than once)."""


class SamplingMonitor(PowerMonitor):
    """Polls ``read_power_w`` in a thread between begin() and stop(); integrates with the trapezoid rule."""

    interval_s = 0.05

    def __init__(self, spec: str, options: Dict[str, str]) -> None:
        super().__init__(spec, options)
        self.samples: List[Tuple[float, float]] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._window: Tuple[float, float] = (0.0, 0.0)

    def read_power_w(self) -> Optional[float]:
        raise NotImplementedError

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                value = self.read_power_w()
            except (OSError, ValueError) as exc:
                log.debug("%s: read failed: %s", self.spec, exc)
                value = None
            if value is None:
                self.failures += 1
            else:
                self.samples.append((time.monotonic(), float(value)))
            self._stop.wait(self.interval_s)

    def begin(self) -> None:
        self.samples.clear()
        self._stop.clear()
        self._window = (time.monotonic(), 0.0)
        self._thread = threading.Thread(target=self._loop, name=f"power-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._window = (self._window[0], time.monotonic())
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)

    def measurement(self) -> PowerMeasurement:
        begin, end = self._window
        points = [(t, p) for t, p in self.samples if begin <= t <= end]
        if len(points) < 2:
            raise DeviceError(
                f"power monitor {self.spec} returned {len(points)} reading(s) during the run "
                f"({self.failures} failed read(s)); no energy figure",
                fix="check the meter's connection and wiring, or run without --power-monitor",
            )
        joules = sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(points, points[1:]))
        # the stretches before the first and after the last reading are covered by those readings
        joules += (points[0][0] - begin) * points[0][1] + (end - points[-1][0]) * points[-1][1]
        return PowerMeasurement(joules=joules, seconds=end - begin, samples=len(points), source=self.describe())

    def describe(self) -> str:
        return self.spec


class RaplReader:
    """Linux powercap RAPL energy counters (intel-rapl:N package domains; also used by AMD CPUs)."""

    def __init__(self, root: Path = POWERCAP_ROOT) -> None:
        self.root = Path(root)

    def domains(self) -> Dict[str, Path]:
        """Top-level (package) domains: {name: folder}; sub-domains (core, uncore, dram) are inside them."""
        found = {}
        for folder in sorted(glob.glob(str(self.root / "intel-rapl:*"))):
            base = os.path.basename(folder)
            if base.count(":") != 1:
                continue
            name = (Path(folder) / "name").read_text().strip() if (Path(folder) / "name").exists() else base
            found[f"{name}({base})"] = Path(folder)
        return found

    def unavailable_reason(self) -> Optional[str]:
        if not self.root.is_dir():
            return f"no RAPL powercap counters on this host ({self.root} does not exist)"
        domains = self.domains()
        if not domains:
            return f"no RAPL powercap counters on this host ({self.root} has no intel-rapl:* domains)"
        for folder in domains.values():
            if not os.access(folder / "energy_uj", os.R_OK):
                return f"{folder / 'energy_uj'} is not readable (the kernel restricts it to root)"
        return None

    def read(self) -> Dict[str, Tuple[int, int]]:
        """{domain: (energy_uj, max_energy_range_uj)}"""
        values = {}
        for name, folder in self.domains().items():
            energy = int((folder / "energy_uj").read_text())
            top = folder / "max_energy_range_uj"
            values[name] = (energy, int(top.read_text()) if top.exists() else 0)
        return values

    @staticmethod
    def delta_uj(before: Dict[str, Tuple[int, int]], after: Dict[str, Tuple[int, int]]) -> int:
        """Energy between two reads, summed over packages, handling one counter wrap per domain."""
        total = 0
        for name, (e0, top) in before.items():
            e1 = after[name][0]
            total += e1 - e0 if e1 >= e0 else e1 + top - e0
        return total


class RaplMonitor(PowerMonitor):
    """Package energy from RAPL counters, read at begin/stop and every 10 s (a counter wraps after
    max_energy_range_uj, minutes to hours depending on power)."""

    name = "rapl"
    poll_s = 10.0

    def __init__(self, spec: str, options: Dict[str, str], root: Path = POWERCAP_ROOT) -> None:
        super().__init__(spec, options)
        self.reader = RaplReader(Path(options.get("root", root)))
        self.total_uj = 0
        self.reads = 0
        self._last: Dict[str, Tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._window = (0.0, 0.0)

    def open(self) -> None:
        reason = self.reader.unavailable_reason()
        if reason:
            raise UserError(f"power monitor rapl: {reason}", fix="use another --power-monitor, or none")

    def _accumulate(self) -> None:
        now = self.reader.read()
        if self._last:
            self.total_uj += self.reader.delta_uj(self._last, now)
        self._last = now
        self.reads += 1

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            self._accumulate()

    def begin(self) -> None:
        self.total_uj, self.reads, self._last = 0, 0, {}
        self._window = (time.monotonic(), 0.0)
        self._accumulate()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="power-rapl", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        self._accumulate()
        self._window = (self._window[0], time.monotonic())

    def measurement(self) -> PowerMeasurement:
        if self.reads < 2:
            raise DeviceError(f"power monitor {self.spec}: the RAPL counters were read {self.reads} time(s); no energy figure")
        begin, end = self._window
        return PowerMeasurement(joules=self.total_uj / 1e6, seconds=end - begin, samples=self.reads,
                                source="Linux RAPL package energy counters (" + ", ".join(self.reader.domains()) + ")")


POWER_MONITORS: Registry[type] = Registry("power monitor")
POWER_MONITORS.register("rapl")(RaplMonitor)
SPEC_HELP = ("rapl | ppk2:PORT[,mode=source|ampere][,mv=3300] | joulescope[:SERIAL][,interval_s=0.1] | "
             "ina219:BUS@ADDR,shunt_ohm=0.1 | ina226:BUS@ADDR,shunt_ohm=0.1 | ina219:hwmon=/sys/class/hwmon/hwmonN")


def parse_monitor_spec(spec: str) -> Tuple[str, str, Dict[str, str]]:
    """``name[:address][,key=value...]`` -> (name, address, options)."""
    head, *pairs = spec.split(",")
    name, _, address = head.partition(":")
    options: Dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise UserError(f"--power-monitor {spec!r}: {pair!r} is not key=value", fix=f"use one of: {SPEC_HELP}")
        options[key.strip()] = value.strip()
    if address.startswith("hwmon="):
        options["hwmon"] = address[len("hwmon="):]
        address = ""
    return name.strip().lower(), address, options


def open_monitor(spec: str) -> PowerMonitor:
    from edgekit.run.measurement import monitors  # noqa: F401  (registers the hardware drivers)

    name, address, options = parse_monitor_spec(spec)
    cls = POWER_MONITORS.get(name)
    monitor = cls(spec, {**options, **({"address": address} if address else {})})
    monitor.open()
    return monitor


# --- estimates from a profile ---------------------------------------------------------------------
def estimate_from_profile(profile: Profile, seconds_per_inference: float, threads: Optional[int]) -> Optional[Figure]:
    """(``profile``: the parsed device profile YAML.) Board power from the profile's power_model, times the measured time per inference; None without a model.

    Model: P = idle_w + (full_load_w - idle_w) * busy_cores / cores, busy_cores = threads used (1 if unset).
    """
    model = profile.get("power_model") or {}
    idle, full, cores = model.get("idle_w"), model.get("full_load_w"), model.get("cores")
    if idle is None or full is None or not cores:
        return None
    busy = min(max(int(threads or 1), 1), int(cores))
    power = float(idle) + (float(full) - float(idle)) * busy / int(cores)
    return estimated(
        power * seconds_per_inference * 1e6,
        f"device profile {profile.get('name')!r} power model ({model.get('source', 'no source given')})",
        model=f"P = idle_w + (full_load_w - idle_w) * busy_cores / cores = {idle} + ({full} - {idle}) * {busy}/{cores} "
              f"= {power:.3g} W, times the measured wall time per inference {seconds_per_inference * 1e3:.4g} ms",
        power_w=power,
    )


def energy_from_measurement(m: PowerMeasurement, iterations: int) -> Figure:
    return measured(m.joules / iterations * 1e6, m.source, average_power_w=m.average_w, seconds=m.seconds,
                    readings=m.samples, iterations=iterations,
                    note="whole-device energy during the warm iterations divided by their count (idle power included)")
