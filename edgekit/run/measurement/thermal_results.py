"""The typed thermal part of run.json: raw sensor samples, interpreted readings, the window series and the
throttling verdict (computed by ``edgekit.run.measurement.thermal``)."""
from __future__ import annotations

from typing import Dict, List, Optional, Union

from typing_extensions import TypedDict

from edgekit.results import Section
from edgekit.results.number import Number
from edgekit.run.sparse import Sparse


# --- raw samples, as the device-side runner reports them (JSON from remote_runner.SensorReader) -------------
class CpuFreq(TypedDict):
    cur_khz: int
    max_khz: Optional[int]


class SensorSample(TypedDict, total=False):
    """One raw sensor sample: the tool outputs as text, sysfs values as numbers; each key only if the device has it."""

    t_s: float                         # seconds since the warm phase began
    thermal_mc: Dict[str, int]         # thermal zone -> millidegrees C
    cpufreq: Dict[str, CpuFreq]        # cpuN -> current and maximum clock
    vcgencmd_throttled: str            # `vcgencmd get_throttled`
    vcgencmd_temp: str                 # `vcgencmd measure_temp`
    vcgencmd_arm_clock: str            # `vcgencmd measure_clock arm`
    dumpsys_thermalservice: str        # Android `dumpsys thermalservice`


# --- parsed tool output ---------------------------------------------------------------------------------
class ThrottledFlags(Section):
    """Raspberry Pi ``vcgencmd get_throttled``: the raw word and its bits by name."""

    raw: int
    under_voltage: bool
    arm_frequency_capped: bool
    currently_throttled: bool
    soft_temperature_limit: bool
    under_voltage_occurred: bool
    arm_frequency_capped_occurred: bool
    throttling_occurred: bool
    soft_temperature_limit_occurred: bool
    thermal_throttling_now: bool       # a live thermal bit (1-3) is set


class AndroidTemperature(Section):
    name: str
    type: str
    value_c: Number
    status: int


class AndroidThermal(Section):
    """Android ``dumpsys thermalservice``: overall status, HAL readiness, the temperatures of the chosen section."""

    status: Optional[int]
    status_name: Optional[str]
    hal_ready: Optional[bool]
    source_section: Optional[str]
    temperatures: List[AndroidTemperature]


# --- run.json: thermal ----------------------------------------------------------------------------------
class Reading(Sparse):
    """One sensor sample interpreted: temperatures in degrees C, clock ratio, throttle flags."""

    t_s: float
    android_thermal_status: Optional[int] = None
    temperature_c: Optional[Dict[str, float]] = None
    cpufreq_max_khz_now: Optional[int] = None
    cpufreq_fastest_ratio: Optional[float] = None
    vcgencmd_throttled: Optional[ThrottledFlags] = None
    arm_clock_hz: Optional[int] = None


class Window(Sparse):
    """One window of the warm phase: latency statistics (ms; none when empty), throughput, sensors seen inside."""

    start_s: float
    length_s: float
    count: int
    throughput_ips: float
    p50_ms: Optional[float] = None
    p90_ms: Optional[float] = None
    p99_ms: Optional[float] = None
    mean_ms: Optional[float] = None
    temperature_c: Optional[Dict[str, float]] = None      # the highest per sensor inside the window
    cpufreq_fastest_ratio: Optional[float] = None         # the lowest inside the window
    vcgencmd_throttled_raw: Optional[int] = None          # the union of the flags
    android_thermal_status: Optional[int] = None          # the highest


class Signal(Sparse):
    """When a signal first showed throttling, and what it saw."""

    onset_s: float
    raw: Optional[str] = None                        # vcgencmd: the flags word (hex)
    status: Optional[Union[str, int]] = None         # android_thermal_status: the status name
    sensors_c: Optional[Dict[str, float]] = None     # temperature: the sensors at or above throttle_c
    throttle_c: Optional[float] = None
    lowest_ratio: Optional[float] = None             # cpufreq
    max_rise: Optional[float] = None                 # latency


class LatencyTest(Section):
    """The change test on window mean latencies; ``reason`` when there were too few windows."""

    usable: bool
    reason: Optional[str] = None
    baseline_mean_ms: Optional[float] = None
    relative_rise: Optional[List[Number]] = None     # nan for an empty window
    max_rise: Optional[float] = None
    detected: Optional[bool] = None
    onset_s: Optional[float] = None


class CriteriaRecord(Section):
    """The detector settings a verdict used (edgekit.run.measurement.thermal.ThrottleCriteria), with the rule in words."""

    threshold: float
    consecutive: int
    baseline_windows: int
    cpufreq_ratio: float
    rule: str
    window_s: Optional[float]
    throttle_c: Optional[float]


class ThermalVerdict(Section):
    throttling_detected: Optional[bool]              # None: neither the latency test nor a sensor could decide
    onset_s: Optional[float]
    first_signal: Optional[str]
    signals: Dict[str, Signal]
    peak_throughput_ips: Optional[float]
    sustained_throughput_ips: Optional[float]
    sustained_to_peak: Optional[float]
    latency_test: LatencyTest
    sensors_available: List[str]
    criteria: CriteriaRecord


class Thermal(Section):
    """Single run: the sensors seen; sustained run: the window series and the throttling verdict."""

    sustained: bool
    sensors_available: Optional[List[str]] = None
    readings: List[Reading] = []
    note: Optional[str] = None
    window_s: Optional[float] = None
    windows: Optional[List[Window]] = None
    verdict: Optional[ThermalVerdict] = None
