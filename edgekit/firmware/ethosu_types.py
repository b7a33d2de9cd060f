"""The Ethos-U placement's parts of firmware.json (edgekit.firmware.ethosu), typed: plain dicts with declared keys,
validated inside ``FirmwareInfo`` (unknown keys refused)."""
from __future__ import annotations

from typing import List, Optional

from pydantic import ConfigDict, with_config
from typing_extensions import NotRequired, TypedDict

STRICT = ConfigDict(extra="forbid")


@with_config(STRICT)
class IoTensor(TypedDict):
    name: str
    type: str
    shape: List[int]
    bytes: int


class NpuLayout(TypedDict):
    """The CUSTOM 'ethos-u' operator's tensors: command stream, read-only weights, scratch, fast scratch, I/O."""

    op_index: int
    command_stream_bytes: int
    read_only_bytes: int
    scratch_bytes: int
    scratch_fast_bytes: int
    scratch_fast_is_scratch: bool
    io_tensors: List[IoTensor]
    io_bytes_aligned: int


@with_config(STRICT)
class VelaModelPlacement(TypedDict):
    """firmware.json ``vela_model``: the Vela-compiled model and where the linker script places it."""

    file: str
    sha256: str
    bytes: int
    section: str
    region: str
    region_origin: str
    alignment: int
    command_stream_bytes: int
    read_only_bytes: int


@with_config(STRICT)
class NpuConfig(TypedDict):
    """firmware.json ``npu``: the board's NPU (devices/ profile) and Vela's configuration for it."""

    accelerator: str
    system_config: str
    memory_mode: str
    base_address: str
    irq: int
    source: str


@with_config(STRICT)
class NpuArena(TypedDict):
    """firmware.json ``arena``: the NPU tensor arena, sized from the compiled model."""

    bytes: int
    region: str
    scratch_bytes: int
    scratch_fast_bytes: int
    io_tensors: List[IoTensor]
    vela_sram_used_bytes: int
    method: str


@with_config(STRICT)
class NpuEstimate(TypedDict):
    """firmware.json ``estimate``: Vela's figure for the NPU part."""

    label: str
    npu_cycles_total: int
    inference_time_ms: float
    note: str


@with_config(STRICT)
class PlacedSymbol(TypedDict):
    address: str
    bytes: int
    region: Optional[str]   # None: outside every memory region of the board
    aligned_16: bool


@with_config(STRICT)
class PlacementCheck(TypedDict):
    """firmware.json ``placement_check``: the arrays' addresses in a linked placement-check ELF (or why not linked)."""

    linked: bool
    reason: NotRequired[str]
    ek_npu_model: NotRequired[PlacedSymbol]
    ek_npu_arena: NotRequired[PlacedSymbol]
    method: NotRequired[str]
