"""The runner contract shared by every kind of device connection.

A device argument (``host``, ``ssh://user@host:port``, ``qemu:mps2-an386``, ``serial:/dev/ttyACM0``,
``adb[:SERIAL]`` or a profile name from ``devices/``) is resolved to a ``DeviceTarget``; the runner
registered under its ``kind`` executes a ``RunRequest`` and returns a ``RunResult``. The ``edgekit run``
command turns results into run.json / report.md / plots. Runners never print; they log and report progress
through the callback, and raise ``DeviceError`` (keeping ``partial``) when a device hangs or disappears.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Union

import numpy as np

from edgekit.profiles import Profile
from edgekit.registry import Registry
from edgekit.results import Figure
from edgekit.run.results import Fault, RunMemory, RunOptions, RunWork
from edgekit.run.measurement.thermal_results import SensorSample

Progress = Callable[[int], None]


@dataclass(frozen=True)
class DeviceTarget:
    """Where to run: the connection kind, its address, and the device profile (devices/*.yaml) if any."""

    kind: str                      # "host", "ssh", "adb", "qemu", "serial", "macos"
    address: str = ""              # "user@host:port", "/dev/ttyACM0", board name for qemu, adb serial
    profile: Profile = field(default_factory=dict)  # the parsed profile YAML as written ({} when none)
    name: str = ""                 # as the user wrote it


@dataclass
class RunRequest:
    artifact: Path                 # .tflite / .onnx / firmware dir / .elf / .mlpackage
    inputs: Sequence[Dict[str, np.ndarray]]  # one dict per sample (name -> array in the model's input dtype/shape)
    iterations: int = 100
    warmup: int = 5
    sustain_s: float = 0.0         # > 0: sustained mode with windows (thermal analysis)
    window_s: float = 5.0
    timeout_s: float = 60.0        # per inference / per device operation
    runtime: str = "auto"          # "litert", "onnxruntime", "tflm", "edgekit", ...
    # why a mapping: the keyword form of RunOptions (Python callers, tests), validated into RunOptions at construction
    options: Union[RunOptions, Mapping[str, Any]] = field(default_factory=RunOptions)
    progress: Optional[Progress] = None

    def __post_init__(self) -> None:
        if not isinstance(self.options, RunOptions):
            self.options = RunOptions(**{k: v for k, v in dict(self.options).items() if v is not None})


@dataclass
class RunResult:
    """Raw measurements; the run command derives statistics and the verdicts from them."""

    device: DeviceTarget
    # why free-form: {"name": ..., "version": ...} plus what each runtime reports about itself (threads, delegate,
    # placement...), as the device-side runner sends it in JSON; run.json records it as written
    runtime: Dict[str, Any]
    load_ms: Optional[float] = None          # model load / initialization
    first_inference_ms: Optional[float] = None
    latencies_ms: List[float] = field(default_factory=list)    # warm iterations, in order
    timestamps_s: List[float] = field(default_factory=list)    # start time of each warm iteration (monotonic, from run start)
    outputs: List[Dict[str, np.ndarray]] = field(default_factory=list)  # device outputs per input sample (first pass)
    memory: RunMemory = field(default_factory=RunMemory)  # peak_rss_bytes / arena_bytes / flash_bytes / ram_bytes
    work: RunWork = field(default_factory=RunWork)        # instructions_per_inference, per_op_instructions, ...
    energy: Optional[Figure] = None                       # the runner's own energy figure (measured or estimated)
    sensors: List[SensorSample] = field(default_factory=list)  # raw sensor samples as the device reports them
    extra: Dict[str, Any] = field(default_factory=dict)   # why: runner-specific facts for run.json (free-form by design)
    complete: bool = True
    incomplete_reason: str = ""
    fault: Optional[Fault] = None  # kind died|hung|disconnected|device-error, detail, ...


class Runner:
    """Base class: one instance per run. ``options`` names the ``RunOptions`` fields this runner reads; the
    `edgekit run` command refuses a flag the chosen runner does not take (``option_problems``)."""

    kind = ""
    options: ClassVar[FrozenSet[str]] = frozenset()

    @classmethod
    def option_problems(cls, given: Iterable[str]) -> List[str]:
        """A sentence for every given option (a ``RunOptions`` field) this runner does not read."""
        return [f"--{name.replace('_', '-')} does not apply to {cls.kind} devices (the {cls.kind} runner does not "
                "take it)" for name in given if name not in cls.options]

    def __init__(self, target: DeviceTarget) -> None:
        self.target = target

    def run(self, request: RunRequest) -> RunResult:  # pragma: no cover - interface
        raise NotImplementedError


RUNNERS: Registry[type] = Registry("device kind")
