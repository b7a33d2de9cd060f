"""Thermal analysis of a sustained run: window series, sensor parsing, and the throttling verdict.

Latency test (works with no sensor at all), stated once here and copied into every verdict:
  - the warm phase is cut into windows of ``window_s`` seconds; each window's *mean* latency is used (it
    rises under any slowdown: lower clocks, or time taken away from the model by throttling or other load);
  - the baseline is the median of the first ``baseline_windows`` window means;
  - r_i = mean_i / baseline - 1 is the relative slowdown; it is smoothed by a running median of 3 windows
    (a single odd window cannot trigger);
  - throttling is detected when the smoothed slowdown stays >= ``threshold`` (default 0.25, i.e. 25 %
    slower) for ``consecutive`` windows in a row (default 3); the onset is the start of the first window of
    that stretch whose raw slowdown crossed the threshold.
Sensor signals (used when the device has them): Raspberry Pi ``vcgencmd get_throttled`` live bits 1-3,
Android ``dumpsys thermalservice`` status >= 1 (LIGHT), the fastest CPU's clock below 95 % of its maximum
for ``consecutive`` samples, a thermal zone at or above the profile's ``thermal.throttle_c``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

from edgekit.run.measurement.thermal_results import (AndroidTemperature, AndroidThermal, CriteriaRecord, LatencyTest, Reading,
                                         SensorSample, Signal, ThermalVerdict, ThrottledFlags, Window)

# --- parsers of tool output -----------------------------------------------------------------------
THROTTLED_BITS = {
    0: "under_voltage", 1: "arm_frequency_capped", 2: "currently_throttled", 3: "soft_temperature_limit",
    16: "under_voltage_occurred", 17: "arm_frequency_capped_occurred", 18: "throttling_occurred",
    19: "soft_temperature_limit_occurred",
}
THERMAL_LIVE_BITS = (1, 2, 3)  # bit 0 is under-voltage: a power problem, reported but not a thermal signal

ANDROID_THERMAL_STATUS = {0: "NONE", 1: "LIGHT", 2: "MODERATE", 3: "SEVERE", 4: "CRITICAL", 5: "EMERGENCY", 6: "SHUTDOWN"}
ANDROID_TEMPERATURE_TYPES = {
    -1: "UNKNOWN", 0: "CPU", 1: "GPU", 2: "BATTERY", 3: "SKIN", 4: "USB_PORT", 5: "POWER_AMPLIFIER",
    6: "BCL_VOLTAGE", 7: "BCL_CURRENT", 8: "BCL_PERCENTAGE", 9: "NPU", 10: "TPU", 11: "DISPLAY", 12: "MODEM", 13: "SOC",
}


def parse_vcgencmd_throttled(text: str) -> Optional[ThrottledFlags]:
    """``throttled=0x50005`` -> ThrottledFlags(raw=0x50005, under_voltage=True, ...); None if not that format."""
    match = re.search(r"throttled=(0x[0-9a-fA-F]+|\d+)", text or "")
    if not match:
        return None
    raw = int(match.group(1), 0)
    bits = {name: bool(raw >> bit & 1) for bit, name in THROTTLED_BITS.items()}
    return ThrottledFlags(raw=raw, **bits, thermal_throttling_now=any(raw >> bit & 1 for bit in THERMAL_LIVE_BITS))


def parse_vcgencmd_temp(text: str) -> Optional[float]:
    match = re.search(r"temp=([-\d.]+)'C", text or "")
    return float(match.group(1)) if match else None


def parse_vcgencmd_clock(text: str) -> Optional[int]:
    match = re.search(r"frequency\(\d+\)=(\d+)", text or "")
    return int(match.group(1)) if match else None


_TEMPERATURE = re.compile(
    r"Temperature\{mValue=(?P<value>[-\d.eE]+|NaN), mType=(?P<type>-?\d+), mName=(?P<name>[^,]+), mStatus=(?P<status>-?\d+)\}"
)


def parse_dumpsys_thermalservice(text: str) -> AndroidThermal:
    """Android ``dumpsys thermalservice``: overall status, HAL readiness, and the HAL's current temperatures
    (the "Cached temperatures" section is older and used only when the HAL section is absent)."""
    status = re.search(r"^\s*Thermal Status:\s*(\d+)", text, re.M)
    hal_ready = re.search(r"^\s*HAL Ready:\s*(true|false)", text, re.M)
    sections = re.split(r"^\s*(Cached temperatures:|Current temperatures from HAL:|Current cooling devices from HAL:|"
                        r"Temperature static thresholds from HAL:)", text, flags=re.M)
    by_section: Dict[str, str] = {}
    for header, body in zip(sections[1::2], sections[2::2]):
        by_section[header.strip()] = body
    chosen = by_section.get("Current temperatures from HAL:") or by_section.get("Cached temperatures:") or ""
    temps = []
    for m in _TEMPERATURE.finditer(chosen):
        value = float(m.group("value")) if m.group("value") != "NaN" else float("nan")
        kind = int(m.group("type"))
        temps.append(AndroidTemperature(name=m.group("name"), type=ANDROID_TEMPERATURE_TYPES.get(kind, str(kind)),
                                        value_c=value, status=int(m.group("status"))))
    code = int(status.group(1)) if status else None
    return AndroidThermal(
        status=code,
        status_name=ANDROID_THERMAL_STATUS.get(code) if code is not None else None,
        hal_ready=(hal_ready.group(1) == "true") if hal_ready else None,
        source_section="Current temperatures from HAL" if "Current temperatures from HAL:" in by_section else
        ("Cached temperatures" if chosen else None),
        temperatures=temps,
    )


def sample_readings(sample: SensorSample) -> Reading:
    """One raw sensor sample from the device -> interpreted readings."""
    temps: Dict[str, float] = {}
    for zone, milli in (sample.get("thermal_mc") or {}).items():
        temps[zone] = milli / 1000.0
    if sample.get("vcgencmd_temp"):
        value = parse_vcgencmd_temp(sample["vcgencmd_temp"])
        if value is not None:
            temps["vcgencmd"] = value
    android_status = None
    if sample.get("dumpsys_thermalservice"):
        parsed = parse_dumpsys_thermalservice(sample["dumpsys_thermalservice"])
        android_status = parsed.status
        for t in parsed.temperatures:
            if np.isfinite(t.value_c):
                temps[f"{t.type}:{t.name}"] = t.value_c
    freqs = sample.get("cpufreq") or {}
    ratios = [f["cur_khz"] / f["max_khz"] for f in freqs.values() if f.get("max_khz")]
    return Reading(
        t_s=float(sample.get("t_s", 0.0)),
        android_thermal_status=android_status,
        temperature_c=temps or None,
        cpufreq_max_khz_now=max(f["cur_khz"] for f in freqs.values()) if freqs else None,
        cpufreq_fastest_ratio=max(ratios) if ratios else None,
        vcgencmd_throttled=parse_vcgencmd_throttled(sample.get("vcgencmd_throttled") or ""),
        arm_clock_hz=parse_vcgencmd_clock(sample.get("vcgencmd_arm_clock") or ""),
    )


# --- windows -------------------------------------------------------------------------------------
def window_series(timestamps_s: Sequence[float], latencies_ms: Sequence[float], window_s: float,
                  wall_s: Optional[float] = None) -> List[Window]:
    """Per window: start, length, count, p50/p90/p99/mean latency (ms), throughput (inferences/s).
    A last window shorter than half a window is dropped (too few samples to compare)."""
    t = np.asarray(timestamps_s, dtype=np.float64)
    lat = np.asarray(latencies_ms, dtype=np.float64)
    if t.size == 0:
        return []
    end = wall_s if wall_s else float(t[-1] + lat[-1] / 1e3)
    windows = []
    n = int(np.ceil(end / window_s))
    for k in range(n):
        lo, hi = k * window_s, min((k + 1) * window_s, end)
        if hi - lo < 0.5 * window_s:
            break
        mask = (t >= lo) & (t < hi)
        values = lat[mask]
        if values.size == 0:
            windows.append(Window(start_s=lo, length_s=hi - lo, count=0, throughput_ips=0.0))
            continue
        p50, p90, p99 = np.percentile(values, [50, 90, 99])
        windows.append(Window(
            start_s=lo, length_s=hi - lo, count=int(values.size),
            p50_ms=float(p50), p90_ms=float(p90), p99_ms=float(p99), mean_ms=float(values.mean()),
            throughput_ips=float(values.size / (hi - lo)),
        ))
    return windows


def attach_sensors(windows: Sequence[Window], readings: Sequence[Reading]) -> List[Window]:
    """Each window with the sensor readings taken inside it (max temperature per sensor, lowest clock ratio,
    the union of throttle flags, the highest Android thermal status)."""
    out = []
    for w in windows:
        inside = [r for r in readings if w.start_s <= r.t_s < w.start_s + w.length_s]
        if not inside:
            out.append(w)
            continue
        temps: Dict[str, float] = {}
        for r in inside:
            for name, value in (r.temperature_c or {}).items():
                temps[name] = max(value, temps.get(name, -np.inf))
        ratios = [r.cpufreq_fastest_ratio for r in inside if r.cpufreq_fastest_ratio is not None]
        flags = [r.vcgencmd_throttled for r in inside if r.vcgencmd_throttled]
        status = [r.android_thermal_status for r in inside if r.android_thermal_status is not None]
        out.append(w.model_copy(update={
            "temperature_c": temps or None,
            "cpufreq_fastest_ratio": min(ratios) if ratios else None,
            "vcgencmd_throttled_raw": int(np.bitwise_or.reduce([f.raw for f in flags])) if flags else None,
            "android_thermal_status": max(status) if status else None,
        }))
    return out


# --- the verdict ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ThrottleCriteria:
    threshold: float = 0.25         # relative rise of the window mean latency over the baseline
    consecutive: int = 3            # windows in a row (after a running median of 3)
    baseline_windows: int = 3       # first windows whose median is the baseline
    cpufreq_ratio: float = 0.95     # fastest CPU below this fraction of its maximum clock

    def record(self, window_s: Optional[float], throttle_c: Optional[float]) -> CriteriaRecord:
        """The settings as a verdict records them, with the rule in words."""
        return CriteriaRecord(threshold=self.threshold, consecutive=self.consecutive,
                              baseline_windows=self.baseline_windows, cpufreq_ratio=self.cpufreq_ratio,
                              rule=self.describe(), window_s=window_s, throttle_c=throttle_c)

    def describe(self) -> str:
        return (f"window mean latency >= {1 + self.threshold:.2f} x baseline (median of the first {self.baseline_windows} "
                f"windows), running median of 3, for {self.consecutive} consecutive windows")


def _first_sustained(flags: Sequence[bool], consecutive: int) -> Optional[int]:
    run = 0
    for i, flag in enumerate(flags):
        run = run + 1 if flag else 0
        if run >= consecutive:
            return i - consecutive + 1
    return None


def latency_signal(windows: Sequence[Window], criteria: ThrottleCriteria) -> LatencyTest:
    """The change test on window mean latencies (see the module docstring)."""
    means = np.array([np.nan if w.mean_ms is None else w.mean_ms for w in windows], dtype=np.float64)
    needed = criteria.baseline_windows + criteria.consecutive
    if means.size < needed or not np.all(np.isfinite(means[: criteria.baseline_windows])):
        return LatencyTest(usable=False, reason=f"{means.size} window(s); the latency test needs at least {needed} "
                                                "(make --sustain at least that many windows long)")
    baseline = float(np.median(means[: criteria.baseline_windows]))
    rise = means / baseline - 1.0
    padded = np.concatenate([rise[:1], rise, rise[-1:]])
    smooth = np.array([np.nanmedian(padded[i: i + 3]) for i in range(rise.size)])
    start = _first_sustained(list(smooth >= criteria.threshold), criteria.consecutive)
    onset_index = None
    if start is not None:
        onset_index = start
        for i in range(max(start - 1, 0), start + criteria.consecutive):
            if rise[i] >= criteria.threshold:
                onset_index = i
                break
    return LatencyTest(
        usable=True, baseline_mean_ms=baseline, relative_rise=[float(v) for v in rise],
        max_rise=float(np.nanmax(rise)), detected=start is not None,
        onset_s=float(windows[onset_index].start_s) if onset_index is not None else None,
    )


def sensor_signals(windows: Sequence[Window], readings: Sequence[Reading], criteria: ThrottleCriteria,
                   throttle_c: Optional[float]) -> Dict[str, Signal]:
    """Which sensors showed throttling, and when first."""
    signals: Dict[str, Signal] = {}
    for r in readings:
        flags = r.vcgencmd_throttled
        if flags and flags.thermal_throttling_now and "vcgencmd" not in signals:
            signals["vcgencmd"] = Signal(onset_s=r.t_s, raw=hex(flags.raw))
        status = r.android_thermal_status
        if status and status >= 1 and "android_thermal_status" not in signals:
            signals["android_thermal_status"] = Signal(onset_s=r.t_s, status=ANDROID_THERMAL_STATUS.get(status, status))
        if throttle_c is not None and "temperature" not in signals:
            hot = {k: v for k, v in (r.temperature_c or {}).items() if v >= throttle_c}
            if hot:
                signals["temperature"] = Signal(onset_s=r.t_s, sensors_c=hot, throttle_c=throttle_c)
    ratios = [(r.t_s, r.cpufreq_fastest_ratio) for r in readings if r.cpufreq_fastest_ratio is not None]
    if ratios:
        start = _first_sustained([ratio < criteria.cpufreq_ratio for _, ratio in ratios], criteria.consecutive)
        if start is not None:
            signals["cpufreq"] = Signal(onset_s=ratios[start][0], lowest_ratio=min(r for _, r in ratios))
    return signals


def throughput_ratio(windows: Sequence[Window]) -> Dict[str, Optional[float]]:
    """Peak = best window; sustained = median of the last third of the windows."""
    rates = [w.throughput_ips for w in windows if w.count]
    if not rates:
        return {"peak_throughput_ips": None, "sustained_throughput_ips": None, "sustained_to_peak": None}
    peak = max(rates)
    tail = rates[-max(1, len(rates) // 3):]
    sustained = float(np.median(tail))
    return {"peak_throughput_ips": peak, "sustained_throughput_ips": sustained, "sustained_to_peak": sustained / peak}


def thermal_verdict(windows: Sequence[Window], readings: Sequence[Reading], sensors_available: Sequence[str],
                    *, criteria: ThrottleCriteria = ThrottleCriteria(), throttle_c: Optional[float] = None) -> ThermalVerdict:
    latency = latency_signal(windows, criteria)
    sensors = sensor_signals(windows, readings, criteria, throttle_c)
    signals = dict(sensors)
    if latency.detected and latency.onset_s is not None:
        signals["latency"] = Signal(onset_s=latency.onset_s, max_rise=latency.max_rise)
    detected: Optional[bool] = bool(signals)
    if not signals and not latency.usable and not sensors_available:
        detected = None  # neither the latency test nor any sensor could decide
    onset = min((s.onset_s for s in signals.values()), default=None)
    first = min(signals, key=lambda k: signals[k].onset_s) if signals else None
    return ThermalVerdict(
        throttling_detected=detected,
        onset_s=onset,
        first_signal=first,
        signals=signals,
        **throughput_ratio(windows),
        latency_test=latency,
        sensors_available=list(sensors_available),
        criteria=criteria.record(windows[0].length_s if windows else None, throttle_c),
    )
