"""The memory plan and memory figures of an edgekit firmware, typed.

They stay plain dicts (TypedDicts: the host runtime builds them, firmware.json and deploy.json carry them, and
``edgekit run`` reads them back), but every key is declared here; pydantic validates them inside ``FirmwareInfo``
and ``DeployReport`` and refuses unknown keys.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Union

from pydantic import ConfigDict, with_config
from typing_extensions import NotRequired, TypedDict

STRICT = ConfigDict(extra="forbid")


# --- the planner's output (edgekit.firmware.host_runtime) ------------------------------------------------------------
@with_config(STRICT)
class PlannedTensor(TypedDict):
    """One arena tensor of the plan; ``name`` is added by edgekit.firmware.generate.memory_plan."""

    index: int
    offset: int
    bytes: int
    first_op: int
    last_op: int
    alias_of: int
    name: NotRequired[str]


@with_config(STRICT)
class PlannedScratch(TypedDict):
    op: int
    offset: int
    bytes: int


@with_config(STRICT)
class ArenaPlan(TypedDict):
    """HostRuntime.plan: the arena the runtime's own planner lays out."""

    arena_bytes: int
    state_bytes: int            # this 64-bit host: an upper bound of a 32-bit MCU's
    persistent_bytes: int
    variables_bytes: int        # of arena_bytes: resource variables (buffers never reused, kept across invocations)
    tensors: List[PlannedTensor]
    scratch: List[PlannedScratch]


@with_config(STRICT)
class Overlap(TypedDict):
    """An op's output planned over one of its inputs (``input`` < 0: a row-streamed group's input)."""

    op: int
    input: int
    d_max: int
    exact: bool
    op_name: NotRequired[str]


@with_config(STRICT)
class StreamWindow(TypedDict):
    tensor: int
    rows: int
    name: NotRequired[str]


@with_config(STRICT)
class StreamedGroup(TypedDict):
    """A row-streamed group of a prepared blob (``ops``: its op names, added by memory_plan)."""

    first_op: int
    last_op: int
    region_bytes: int
    windows: List[StreamWindow]
    ops: NotRequired[List[str]]


class Prepared(TypedDict):
    """HostRuntime.prepared: the prepared model of an --optimize mode."""

    blob: bytes
    arena_bytes: int
    state_slots: int
    optimize: str
    overlaps: List[Overlap]
    plan: ArenaPlan
    streamed_groups: List[StreamedGroup]


@with_config(STRICT)
class PlainPlan(TypedDict):
    """The in-place .tflite path (no prepared model), as a device loading the model at run time plans it."""

    arena_bytes: int
    state_bytes_host: int
    persistent_bytes: int


@with_config(STRICT)
class RelaidOp(TypedDict):
    """One op --weights auto gave its re-laid-out weight copy (within the flash budget)."""

    op: int
    op_name: str
    extra_bytes: int                    # flash over the int8-weight plan, this op's copy alone (measured)
    macs: int
    estimated_instructions_saved: int   # per inference on Cortex-M4 (estimated: weight_budget.SAVED_RATES)


@with_config(STRICT)
class FlashBudget(TypedDict):
    """--weights auto's flash budget for the model (compacted constants + prepared blob)."""

    limit_ratio: float                  # x the .tflite (issue 29: 1.2)
    limit_bytes: int                    # the smaller of limit_ratio x the .tflite and the board's flash less the code reserve
    tflite_bytes: int
    int8_flash_bytes: int               # measured: every op's weights int8
    relaid_flash_bytes: int             # measured: every copy re-laid out
    flash_bytes: int                    # measured: this plan
    estimated_instructions_saved: int   # per inference, by the chosen copies (estimated)
    estimated_instructions_saved_relaid: int  # by all copies (estimated)
    estimate: str                       # how the instructions saved are estimated


@with_config(STRICT)
class WeightLayouts(TypedDict):
    """firmware.json plan.weight_layouts: what the weights cost in flash and why (measured from the prepared blob)."""

    flash_layouts: bool             # re-laid-out weight copies in the prepared blob (faster on Cortex-M4)
    weights: NotRequired[str]       # --weights: auto | int8 | relaid
    note: str
    constants_bytes: NotRequired[int]       # of the .tflite kept in flash (compacted constants, or the whole model)
    prepared_bytes: NotRequired[int]        # the prepared blob
    relaid_bytes: NotRequired[int]          # of the blob over the int8-weight plan's: the re-laid-out copies
    originals_dropped: NotRequired[int]     # constant tensors no op reads (EKP_UNREAD), left out of flash
    originals_dropped_bytes: NotRequired[int]
    relaid_ops: NotRequired[List[RelaidOp]]   # --weights auto over budget: the ops that kept their copies
    flash_budget: NotRequired[FlashBudget]


class MemoryPlan(ArenaPlan):
    """edgekit.firmware.generate.memory_plan: the prepared plan of one --optimize mode (not JSON: has the blob)."""

    op_names: List[str]
    optimize: str
    prepared_blob: bytes
    prepared_bytes: int
    state_slots: int
    kernel_paths: List[str]     # EK_NEED_* macros of the optional kernel paths the model uses
    overlaps: List[Overlap]
    streamed_groups: List[StreamedGroup]
    plain: PlainPlan
    weight_layouts: WeightLayouts


class ModeFigures(TypedDict):
    """One --optimize mode's RAM figures for the does-not-fit message."""

    arena_bytes: int
    state_bytes: int


# --- firmware.json: plan -------------------------------------------------------------------------------------------
@with_config(STRICT)
class OverlapRow(TypedDict):
    """Per planned overlap: which op's output may overlap which input, by how much and why."""

    op: int
    op_name: str
    input: Union[int, str]      # "group input" for a row-streamed group
    group_first_op: NotRequired[int]
    rule: str
    why: str


@with_config(STRICT)
class WindowRow(TypedDict):
    tensor: Union[str, int]     # the tensor's name (its index when unnamed)
    rows: int


@with_config(STRICT)
class StreamedGroupRow(TypedDict):
    """Per row-streamed group: its ops and the rows each intermediate tensor keeps in RAM."""

    ops: str
    first_op: int
    last_op: int
    op_names: List[str]
    region_bytes: int
    windows: List[WindowRow]
    why: str


@with_config(STRICT)
class PlanReport(TypedDict):
    """firmware.json ``plan``: the offline memory plan."""

    tensors: List[PlannedTensor]
    scratch: List[PlannedScratch]
    persistent_bytes: Optional[int]
    variables_bytes: NotRequired[int]   # of the arena: resource variables (streaming state kept across invocations)
    optimize: Optional[str]
    prepared_bytes: Optional[int]
    overlaps: List[OverlapRow]
    streamed_groups: List[StreamedGroupRow]
    weight_layouts: Optional[WeightLayouts]
    plain_in_place_tflite: Optional[PlainPlan]


# --- firmware.json: flash and RAM ----------------------------------------------------------------------------------
@with_config(STRICT)
class FlashSplit(TypedDict):
    """Flash bytes by role from the GNU ld map (edgekit.firmware.sizes.flash_split)."""

    model: int
    prepared: int
    runtime_core: int
    model_api: NotRequired[int]   # the generated per-model C API (edgekit_model.c) both app and library call
    runtime_kernels: int
    startup_protocol: int
    libc: int
    runtime_code: NotRequired[int]   # core + kernels (firmware.json)
    method: NotRequired[str]


@with_config(STRICT)
class FlashFigures(TypedDict):
    """firmware.json ``flash``: flash use with its method (linked ELF sections, or the model alone)."""

    bytes: int
    model: int
    method: str
    code_and_rodata: NotRequired[int]
    text: NotRequired[int]
    rodata: NotRequired[int]
    data_init: NotRequired[int]
    split: NotRequired[FlashSplit]


@with_config(STRICT)
class StaticStack(TypedDict):
    """The stack from the call graph (-fstack-usage) or the linker reservation."""

    bytes: int
    method: str
    estimated: NotRequired[bool]
    chain: NotRequired[List[str]]


@with_config(STRICT)
class StackFigure(StaticStack):
    """The stack: measured on the device (with the static estimate beside it) or estimated."""

    static_estimate: NotRequired[StaticStack]


@with_config(STRICT)
class RuntimeRam(TypedDict):
    """The RAM the runtime needs: arena + mutable state, each with how it was obtained."""

    bytes: int
    arena: int
    mutable_state: int
    method: str
    variables: NotRequired[int]  # of arena: the resource variables' buffers (state kept between inferences)


@with_config(STRICT)
class RamFigures(TypedDict):
    """firmware.json ``ram``: arena + state + other static data + stack, with its method."""

    bytes: int
    arena: int
    state: int
    other_static: Optional[int]
    stack: StackFigure
    method: str
    data: NotRequired[int]
    bss: NotRequired[int]
    stack_reserved: NotRequired[int]
    linked_bytes: NotRequired[int]
    state_used_on_device: NotRequired[int]
    runtime: NotRequired[RuntimeRam]


class DeviceFigures(TypedDict):
    """What the firmware reported after booting under QEMU and one inference."""

    stack_used: int
    stack_bytes: int
    state_used: int
    arena_used: int
    machine: str


@with_config(STRICT)
class FitFigures(TypedDict):
    used: int
    available: int
    free: int
    fits: bool


class FitReport(TypedDict):
    flash: FitFigures
    ram: FitFigures


@with_config(STRICT)
class VsTflm(TypedDict):
    """Runtime RAM against TFLM's smallest working arena (a quoted TFLM figure, not re-measured)."""

    model: str
    tflm_min_arena_32bit: int
    tflm_cmsis_nn_instructions_m4: float
    ram_ratio: float
    method: str


@with_config(STRICT)
class BuildRecord(TypedDict):
    """firmware.json ``build``: how (and whether) the ELF was built."""

    built: bool
    reason: NotRequired[str]
    requested: NotRequired[bool]     # ethos-u: whether --build was asked for
    tflm_arch: NotRequired[str]      # tflm: the TARGET_ARCH its Makefile passes to TFLM
    elf: NotRequired[Optional[str]]
    elf_sha256: NotRequired[Optional[str]]
    toolchain: NotRequired[Optional[str]]
    cflags: NotRequired[str]
    ldflags: NotRequired[str]
    flash_split: NotRequired[Optional[FlashSplit]]
    qemu: NotRequired[Optional[str]]


@with_config(STRICT)
class OpRow(TypedDict):
    """firmware.json ``ops``: one operator (edgekit / tflm: index and MACs; ethos-u: where it runs and why)."""

    name: str
    location: str
    index: NotRequired[int]
    macs: NotRequired[int]
    runs_on: NotRequired[str]
    supported: NotRequired[bool]
    reason: NotRequired[Optional[str]]


class ProjectFiles(TypedDict):
    """What write_project_sources wrote: the kernels copied and every C/asm source compiled."""

    kernels: List[str]
    sources: List[str]


@with_config(STRICT)
class DeployRuntimeRam(TypedDict, total=False):
    """deploy.json ``firmware.runtime_ram``: firmware.json's ram.runtime and the device's stack high-water mark."""

    bytes: int
    arena: int
    mutable_state: int
    method: str
    variables: int
    stack_high_water_device: Optional[int]


class TensorJson(TypedDict):
    """A model input/output in firmware.json (first quantization scale and zero point)."""

    name: str
    type: str
    shape: List[int]
    scale: Optional[float]
    zero_point: Optional[int]


class TimestampSource(TypedDict, total=False):
    """The MLPerf Tiny harness's microsecond timer and, in energy mode, its timestamp pin."""

    timer: str
    timer_source: str
    timestamp_pin: str
    timestamp_pin_source: str


@with_config(STRICT)
class HarnessApp(TypedDict):
    """firmware.json ``app``: the MLPerf Tiny harness built around the runtime (edgekit.firmware.mlperf)."""

    harness: str
    task: str
    model_id: str
    mode: str
    firmware_version: str
    input_format: str
    input_bytes: int
    results: str
    uart_baud: int
    timer: str
    timer_source: str
    timestamp_pin: NotRequired[str]
    timestamp_pin_source: NotRequired[str]
    protocol: str


# --- firmware.json of the tflm runtime -----------------------------------------------------------------------------
@with_config(STRICT)
class TflmResolver(TypedDict):
    """The MicroMutableOpResolver of the generated TFLM project: its size and Add* calls."""

    size: int
    methods: List[str]
