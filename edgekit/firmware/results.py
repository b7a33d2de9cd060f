"""``FirmwareInfo`` (firmware.json of a generated project: edgekit, tflm and ethos-u runtimes) and ``DeployReport``
(deploy.json of `edgekit deploy`), typed.

The fields every runtime writes are typed sections (model, board, fits, signature); the runtime-specific parts
(memory plan, flash/RAM breakdowns, build record, NPU placement) keep the structure their producer gives them and
are documented in README.md of the generated project.
"""
from __future__ import annotations

from typing import ClassVar, Dict, List, Literal, Mapping, Optional

from pydantic import ConfigDict

from edgekit.firmware.cycle_model import CycleEstimate
from edgekit.compile.result import CpuOperator
from edgekit.firmware.ethosu_types import NpuArena, NpuConfig, NpuEstimate, PlacementCheck, VelaModelPlacement
from edgekit.firmware.plan_types import (BuildRecord, DeployRuntimeRam, FlashFigures, FlashSplit, HarnessApp, OpRow,
                                         OverlapRow, PlanReport, RamFigures, StreamedGroupRow,
                                         TflmResolver, VsTflm)
from edgekit.results import Figure, Result, Section
from edgekit.run.results import BitExactness, InstructionCount, Json, OpInstructions, RunMemory, Signature


class TensorInfo(Section):
    model_config = ConfigDict(frozen=True, extra="allow")  # quantization facts per tensor kind

    name: str
    type: str
    shape: List[int]


class ModelInFlash(Section):
    """The bytes of the model the firmware keeps in flash (beside the prepared model), what they are and why."""

    bytes: int
    what: str
    why: str
    tensor_bytes: Optional[int] = None
    quantization_bytes: Optional[int] = None


class FirmwareModel(Section):
    """The model embedded in the firmware."""

    file: str
    source: str
    sha256: str
    bytes: int
    constant_data_bytes: Optional[int] = None
    flatbuffer_overhead_bytes: Optional[int] = None
    in_flash: Optional[ModelInFlash] = None   # what of the .tflite the firmware keeps in flash, and why
    inputs: Optional[List[TensorInfo]] = None
    outputs: Optional[List[TensorInfo]] = None


class BoardSummary(Section):
    """The board the firmware is built for (from its devices/ profile)."""

    model_config = ConfigDict(frozen=True, extra="allow")  # board-specific facts (NPU regions, ...)

    board: str
    core: Optional[str] = None
    clock_hz: Optional[int] = None
    firmware_clock_hz: Optional[int] = None
    flash_bytes: Optional[int] = None
    ram_bytes: Optional[int] = None
    connection: Optional[Dict[str, Json]] = None  # the profile's connection block as written
    profile: Optional[str] = None
    cpu_flags: Optional[List[str]] = None
    stack_reserved_bytes: Optional[int] = None


class Fit(Section):
    """One memory of the board: used vs available, with how ``used`` was obtained."""

    used: int
    available: int
    fits: bool
    free: Optional[int] = None
    method: Optional[str] = None


class Fits(Section):
    flash: Fit
    ram: Fit

    @property
    def all_fit(self) -> bool:
        return self.flash.fits and self.ram.fits


class TflmArena(Section):
    """How kTensorArenaSize was found (edgekit.firmware.tflm.measure_tflm_arena); every figure is bytes."""

    recorded_total: int
    recorded_head: int
    recorded_tail: int
    categories: Dict[str, int]
    min_working_64bit: int
    pointer_correction: int
    estimated_32bit: int
    margin: int
    arena_size: int
    tflm_version: str
    notes: List[str]
    method: str


class FirmwareInfo(Result):
    """a generated firmware project: model, board, memory fit, ops, build"""

    SCHEMA: ClassVar[str] = "firmware"

    edgekit_firmware: Literal[1] = 1
    runtime: Literal["edgekit", "tflm", "ethos-u"]
    model: FirmwareModel
    board: BoardSummary
    ops: List[OpRow]
    build: BuildRecord
    signature: Signature
    # the edgekit and tflm runtimes
    arena_bytes: Optional[int] = None
    state_bytes: Optional[int] = None
    state_bytes_note: Optional[str] = None
    flash_bytes: Optional[int] = None
    ram_bytes: Optional[int] = None
    fits: Optional[Fits] = None
    macs: Optional[int] = None
    # the edgekit runtime
    flash: Optional[FlashFigures] = None
    ram: Optional[RamFigures] = None
    op_counts: Optional[Dict[str, int]] = None
    kernels: Optional[List[str]] = None
    plan: Optional[PlanReport] = None
    optimize: Optional[str] = None
    runtime_code_bytes: Optional[int] = None
    vs_tflm: Optional[VsTflm] = None
    app: Optional[HarnessApp] = None              # the application built around the runtime
    # the tflm runtime
    resolver: Optional[TflmResolver] = None
    tflm_arena: Optional[TflmArena] = None
    # the ethos-u runtime (placement only)
    runnable_here: Optional[bool] = None
    not_runnable_reason: Optional[str] = None
    vela_model: Optional[VelaModelPlacement] = None
    npu: Optional[NpuConfig] = None
    arena: Optional[NpuArena] = None
    estimate: Optional[NpuEstimate] = None
    cpu_fallback_ops: Optional[List[str]] = None
    cpu_fallback_reasons: Optional[List[CpuOperator]] = None
    placement_check: Optional[PlacementCheck] = None

    def to_dict(self) -> Dict[str, Json]:
        return self.model_dump(mode="json", exclude_unset=True)

    @property
    def fits_board(self) -> bool:
        return self.fits is None or self.fits.all_fit

    def op_names(self) -> Dict[str, int]:
        """Operator name -> count, in the model's order."""
        counts: Dict[str, int] = {}
        for op in self.ops:
            counts[str(op["name"])] = counts.get(str(op["name"]), 0) + 1
        return counts


def read_firmware_info(data: Mapping[str, Json]) -> FirmwareInfo:
    """A loaded firmware.json back into its type."""
    return FirmwareInfo.model_validate({k: v for k, v in data.items() if k != "schema"})


# --- deploy.json ---------------------------------------------------------------------------------------------------
class DeployModel(Section):
    source: str
    int8_sha256: str
    int8_bytes: int
    float_sha256: Optional[str] = None


class DeployFirmware(Section):
    """The firmware's memory figures, with the device's measurements where the run gave them."""

    arena_bytes: int
    state_bytes: int
    state_used_on_device_bytes: Optional[int] = None
    flash_bytes: int
    flash: FlashFigures
    ram_bytes: int
    ram_method: str
    ram_static_estimate_bytes: int
    ram: RamFigures
    fits: Fits
    fits_board: bool
    ops: Dict[str, int]
    kernels: List[str]
    macs: int
    optimize: Optional[str] = None
    runtime_code_bytes: Optional[int] = None
    runtime_ram: DeployRuntimeRam
    flash_split: Optional[FlashSplit] = None
    overlaps: Optional[List[OverlapRow]] = None
    streamed_groups: Optional[List[StreamedGroupRow]] = None
    vs_tflm: Optional[VsTflm] = None


class DeployDevice(Section):
    """What the board (QEMU) did with the firmware."""

    device: str
    runtime: Dict[str, Json]
    outputs_bit_exact: BitExactness
    instructions_per_inference: Optional[int] = None
    instructions: Optional[InstructionCount] = None
    instructions_per_mac: Optional[float] = None
    macs_per_inference: Optional[int] = None
    per_op_instructions: List[OpInstructions] = []
    memory: RunMemory
    inputs: Dict[str, Json] = {}           # edgekit.run.inputs description of the samples


class Estimates(Section):
    latency_ms: Figure
    energy_uj: Figure
    cycles: Optional[CycleEstimate] = None  # per instruction class x the core's timing (edgekit.firmware.cycle_model)


class DeployReport(Result):
    """edgekit deploy: parity, firmware fit, device outputs and estimates of one model on one board"""

    SCHEMA: ClassVar[str] = "deploy"

    edgekit_deploy: Literal[1] = 1
    passed: bool
    failures: List[str]
    model: DeployModel
    board: BoardSummary
    parity: Dict[str, Json]                # the parity.json content of the quantize stage
    firmware: DeployFirmware
    device: DeployDevice
    estimates: Estimates
    plots: List[str] = []
    signature: Signature

    def to_dict(self) -> Dict[str, Json]:
        return self.model_dump(mode="json", exclude_unset=True)
