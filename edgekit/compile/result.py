"""``CompileReport``: the typed compile.json of `edgekit compile` (Vela's estimate for an Ethos-U NPU).

Every performance and memory figure is Vela's *estimate* (``estimate.method`` is "estimated", ``label`` says with
which configuration); the only figures edgekit derives are the MAC utilization and unit conversions."""
from __future__ import annotations

from typing import Dict, List, Literal, Optional, Union

from pydantic import Field

from edgekit.provenance import utc_now
from edgekit.results import Result, Section

Count = Union[int, float]  # Vela's CSV cells: integers where it writes integers


class CompileTarget(Section):
    accelerator: str
    macs_per_cycle: int
    system_config: str
    memory_mode: str
    config_file: str
    config_given: Optional[str]
    system_config_given: Optional[str]
    memory_mode_given: Optional[str]
    optimise: str
    npu_clock_hz: float


class Estimate(Section):
    method: Literal["estimated"] = "estimated"
    label: str
    source: str


class ModelFacts(Section):
    source: str
    sha256: str
    bytes: int
    operators: int
    operator_counts: Dict[str, int]


class CompiledModel(Section):
    file: str
    sha256: str
    bytes: int
    operator_counts: Dict[str, int]
    note: str


class NpuPerformance(Section):
    label: str
    npu_cycles_total: int
    cycles_npu: int
    cycles_sram_access: int
    cycles_dram_access: int
    cycles_on_chip_flash_access: int
    cycles_off_chip_flash_access: int
    inference_time_s: float
    inference_time_ms: float
    vela_inference_time_s: float
    inferences_per_second: float
    macs_total: int
    mac_utilization_percent: float
    mac_utilization_method: str
    layers_cycles_sum: int
    layers_macs_sum: int


class NpuMemory(Section):
    label: str
    sram_used_bytes: int
    off_chip_flash_used_bytes: int
    on_chip_flash_used_bytes: int
    dram_used_bytes: int
    weights_original_bytes: int
    weights_npu_encoded_bytes: int
    weights_storage_area: str
    feature_map_storage_area: str
    arena_cache_size_bytes: int
    method: str


class CpuOperator(Section):
    """An operator Vela leaves on the CPU, with Vela's own reason(s)."""

    op: str
    ofm: str
    reasons: List[str] = []


class Placement(Section):
    npu_operators: int
    cpu_layers: List[str]
    cpu_operators: List[CpuOperator]
    cpu_operator_lines: List[str]
    all_on_npu: bool


class VelaLayer(Section):
    """One row of Vela's per-layer CSV (``edgekit.compile.vela_tool.parse_per_layer`` names the columns)."""

    index: int
    original_operator: str
    operator: str
    target: str
    staging_usage_bytes: Count
    staging_peak_percent: Count
    cycles: Count
    cycles_percent: Count
    npu_cycles: Count
    sram_access_cycles: Count
    dram_access_cycles: Count
    on_chip_flash_access_cycles: Count
    off_chip_flash_access_cycles: Count
    macs: Count
    macs_percent: Count
    mac_utilization_percent: Count
    name: str


class VelaFacts(Section):
    version: str
    command: List[str]
    warnings: List[str]


class HostFacts(Section):
    hostname: str
    platform: str
    machine: str
    python: str
    processor: str


class CompileSignature(Section):
    """What the estimate depends on (model, tools, host, time)."""

    model_sha256: str
    vela_version: str
    tools: Dict[str, str]
    host: HostFacts
    created: str = Field(default_factory=utc_now)
    edgekit: str


class CompileReport(Result):
    """`edgekit compile` (Arm Ethos-U via Vela): the target, Vela's performance and memory estimate, placement"""

    SCHEMA = "compile"

    edgekit_compile: int = Field(1, description="format marker kept from before versioned schemas")
    target: CompileTarget
    estimate: Estimate
    model: ModelFacts
    output: CompiledModel
    performance: NpuPerformance
    memory: NpuMemory
    placement: Placement
    layers: List[VelaLayer]
    vela: VelaFacts
    signature: CompileSignature

    @classmethod
    def from_json(cls, document: Dict[str, object]) -> "CompileReport":
        """The report read back from compile.json (or its dict), the stamp dropped."""
        return cls.model_validate({k: v for k, v in document.items() if k != "schema"})
