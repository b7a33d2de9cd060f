"""The typed hand-offs of a device run: ``RunOptions`` (what the CLI asks of a runner), ``RunMemory`` / ``RunWork``
(what a runner measured), and ``RunReport`` (run.json, built by ``edgekit.run.report.build_run_report``).

Sections are frozen: a runner that learns a figure later builds the next value with ``updated(section, key=...)``.
Every energy / latency estimate is a ``Figure`` (method measured | estimated | unavailable, with its source).
"""
from __future__ import annotations

from typing import Any, ClassVar, Dict, List, Literal, Mapping, Optional, TypeVar, Union

from pydantic import ConfigDict

from edgekit.firmware.cycle_model import CycleEstimate
from edgekit.results import Figure, Result, Section
from edgekit.run.measurement.thermal_results import Thermal

S = TypeVar("S", bound=Section)
Json = Union[None, bool, int, float, str, List[Any], Dict[str, Any]]  # one JSON value (reports written as they come)


def updated(section: S, **changes: Any) -> S:
    """A copy of a frozen section with ``changes`` (validated like a new one)."""
    return type(section)(**{**section.model_dump(exclude_unset=True), **changes})


class RunOptions(Section):
    """Runner options from the command line; each runner reads the ones it takes (None / [] = not given)."""

    threads: Optional[int] = None
    power_monitor: Optional[str] = None        # --power-monitor SPEC (edgekit.run.measurement.energy)
    remote_python: Optional[str] = None        # ssh / adb
    ssh_identity: Optional[str] = None
    ssh_options: List[str] = []
    connect_timeout_s: Optional[float] = None  # ssh
    arena_bytes: Optional[int] = None          # --runtime tflm
    resolver: Optional[str] = None             # tflm op resolver
    num_outputs: Optional[int] = None          # tflm
    flash: Optional[bool] = None               # serial: flash with pyocd first
    compute_units: List[str] = []              # Core ML
    benchmark_binary: Optional[str] = None     # adb: LiteRT's benchmark_model
    delegate: Optional[str] = None
    coordinator: Optional[str] = None          # labgrid
    lock_timeout: Optional[float] = None
    boot_timeout_s: Optional[float] = None     # firmware boards
    startup_timeout_s: Optional[float] = None  # remote runner start
    sensor_interval_s: Optional[float] = None  # thermal sampling

    CONFIG_KEYS: ClassVar[tuple] = ("threads", "power_monitor", "resolver", "arena_bytes", "compute_units")

    def config(self) -> Dict[str, Json]:
        """The options run.json records in ``config`` (those given)."""
        return {k: getattr(self, k) for k in self.CONFIG_KEYS if getattr(self, k) not in (None, [])}


class RunMemory(Section):
    """Memory figures of a run; each runner fills the ones its device reports."""

    peak_rss_bytes: Optional[int] = None
    rss_before_load_bytes: Optional[int] = None
    rss_after_load_bytes: Optional[int] = None
    source: Optional[str] = None                # where the figures come from, when a tool gives them
    arena_bytes: Optional[int] = None           # MCU firmware (HELLO)
    arena_used_bytes: Optional[int] = None
    state_bytes: Optional[int] = None
    state_used_bytes: Optional[int] = None
    stack_bytes: Optional[int] = None
    stack_used_bytes: Optional[int] = None
    flash_bytes: Optional[int] = None
    ram_bytes: Optional[int] = None
    ram_method: Optional[str] = None


class InstructionCount(Section):
    median: int
    min: int
    max: int
    inferences: int
    method: str


class OutputComparison(Section):
    """Element-wise comparison of the device's integer outputs with a reference, over all samples."""

    bit_exact: Optional[bool]
    differing_elements: Optional[int] = None
    total_elements: Optional[int] = None
    max_abs_diff_lsb: Optional[int] = None
    differing_per_sample: Optional[List[int]] = None
    reason: Optional[str] = None   # why there is no comparison


class BitExactness(Section):
    """outputs_bit_exact: the device's outputs vs LiteRT BUILTIN_REF (``value``), and vs the TFLM python runtime."""

    value: Optional[bool]
    reason: Optional[str] = None   # why there is no verdict
    reference: Optional[str] = None
    samples: Optional[int] = None
    bit_exact: Optional[bool] = None
    differing_elements: Optional[int] = None
    total_elements: Optional[int] = None
    max_abs_diff_lsb: Optional[int] = None
    differing_per_sample: Optional[List[int]] = None
    vs_tflm_python: Optional[OutputComparison] = None
    matches: Optional[str] = None
    note: Optional[str] = None


class OpInstructions(Section):
    """Instructions one operator (or one row-streamed group of operators) took per inference on the device."""

    index: int
    op: Optional[str]
    instructions: int
    macs: Optional[int]
    last_index: Optional[int] = None
    ops: Optional[List[Optional[str]]] = None
    row_streamed: Optional[bool] = None


class RunWork(Section):
    """Work counted on an MCU device (QEMU plugin instruction counts, DWT cycles, bit-exactness)."""

    board: Optional[str] = None
    arena_bytes: Optional[int] = None
    flash_bytes: Optional[int] = None
    instructions_per_inference: Optional[int] = None
    instructions: Optional[InstructionCount] = None
    macs_per_inference: Optional[int] = None
    instructions_per_mac: Optional[float] = None
    per_op_instructions: Optional[List[OpInstructions]] = None
    latency_ms_estimated: Optional[Figure] = None
    # cycles of one inference from its instruction classes and the core's timing (edgekit.firmware.cycle_model)
    cycles_estimated: Optional[CycleEstimate] = None
    cycles_per_inference: Optional[int] = None
    latency_method: Optional[str] = None
    outputs_bit_exact: Optional[BitExactness] = None


class Fault(Section):
    """Why a run stopped early; runners add what they know (inferences completed, exit code, ...)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    kind: str
    detail: Optional[str] = None
    inferences_completed: Optional[int] = None


# --- run.json ----------------------------------------------------------------------------------------------------
class ArtifactRef(Section):
    path: str
    sha256: str


class DeviceRef(Section):
    name: str
    kind: str
    address: str
    profile: Optional[str] = None
    profile_path: Optional[str] = None


class RunConfig(Section):
    model_config = ConfigDict(frozen=True, extra="allow")  # the recorded RunOptions.config() keys

    iterations: int
    warmup: int
    sustain_s: float
    window_s: float
    timeout_s: float
    inputs: Dict[str, Json]  # edgekit.run.inputs description (kind, path, samples, ...)


class ColdStart(Section):
    load: Optional[float] = None
    first_inference: Optional[float] = None
    runtime_import: Optional[float] = None


class LatencySummary(Section):
    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra={"required": ["p50", "p90", "p99", "max", "count"]})

    count: int
    p50: Optional[float] = None
    p90: Optional[float] = None
    p99: Optional[float] = None
    max: Optional[float] = None
    min: Optional[float] = None
    mean: Optional[float] = None
    std: Optional[float] = None


class OutputTensor(Section):
    name: str
    dtype: str
    shape: List[int]
    sha256: str


class OutputSample(Section):
    sample: int
    tensors: List[OutputTensor]


class CoremlRow(Section):
    """One compute-unit setting: its figures, or (``complete`` false) the error that stopped it."""

    compute_units: str
    complete: bool
    error: Optional[str] = None
    load_ms: Optional[float] = None
    first_inference_ms: Optional[float] = None
    latency_ms: Optional[LatencySummary] = None
    throughput_ips: Optional[float] = None
    peak_rss_bytes: Optional[int] = None
    outputs_max_abs_diff: Optional[float] = None
    # Core ML's per-op plan as edgekit.coreml.macos reports it (available, ops, summary | reason): coreml/'s shape
    placement: Optional[Dict[str, Json]] = None


class CoremlSection(Section):
    compute_units: List[CoremlRow]
    primary: str                     # the setting whose run gives run.json's main figures
    outputs_reference: str           # the setting the others' outputs are compared with
    placement_source: str
    note: str


class Signature(Section):
    """Who made the file, with what (tool versions, host) and when."""

    model_config = ConfigDict(frozen=True, extra="allow")  # stage-specific keys (artifact sha256, device, ...)

    tools: Dict[str, Optional[str]]
    host: Dict[str, Optional[str]]
    created: str


class RunReport(Result):
    """a model run on a device: cold start, latency, memory, energy, thermal, outputs"""

    SCHEMA: ClassVar[str] = "run"

    edgekit_run: Literal[1] = 1
    complete: bool
    incomplete_reason: Optional[str]
    fault: Optional[Fault]
    artifact: ArtifactRef
    device: DeviceRef
    runtime: Dict[str, Json]  # name, version and what else the runtime reports (threads, delegate, placement...)
    config: RunConfig
    cold_start_ms: ColdStart
    cold_start_note: Optional[str]
    latency_ms: LatencySummary
    latency_note: str
    throughput_ips: Optional[float]
    memory: RunMemory
    energy_uj_per_inference: Figure
    thermal: Thermal
    work: RunWork
    outputs: List[OutputSample]
    outputs_file: Optional[str]
    extra: Dict[str, Json]  # runner-specific facts (labgrid place, battery, firmware origin, ...)
    coreml: Optional[CoremlSection] = None  # per compute-unit table (edgekit.run.runners.host.coreml_section)
    # MCU facts repeated at the top level (from work and memory) for tools that read them there
    board: Optional[str] = None
    arena_bytes: Optional[int] = None
    flash_bytes: Optional[int] = None
    ram_bytes: Optional[int] = None
    instructions_per_inference: Optional[int] = None
    instructions: Optional[InstructionCount] = None
    macs_per_inference: Optional[int] = None
    instructions_per_mac: Optional[float] = None
    per_op_instructions: Optional[List[OpInstructions]] = None
    latency_ms_estimated: Optional[Figure] = None
    # cycles of one inference from its instruction classes and the core's timing (edgekit.firmware.cycle_model)
    cycles_estimated: Optional[CycleEstimate] = None
    cycles_per_inference: Optional[int] = None
    latency_method: Optional[str] = None
    outputs_bit_exact: Optional[BitExactness] = None
    latencies_file: Optional[str] = None
    plots: List[str] = []
    signature: Signature

    def to_dict(self) -> Dict[str, Json]:
        return self.model_dump(mode="json", exclude_unset=True)


def read_run_report(data: Mapping[str, Json]) -> RunReport:
    """A run.json document (as loaded) back into its type; a file of another schema is refused."""
    from edgekit.schemas import schema_id

    if data.get("schema", schema_id("run")) != schema_id("run"):
        raise ValueError(f"not a {schema_id('run')} document: {data.get('schema')}")
    return RunReport.model_validate({k: v for k, v in data.items() if k != "schema"})

