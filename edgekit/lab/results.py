"""The lab's typed results: a cell's row (cell.json, one row of table.json) and ``LabTable`` (table.json of
`edgekit lab`)."""
from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Dict, List, Optional, Union

from pydantic import ConfigDict, with_config
from typing_extensions import NotRequired, TypedDict

from edgekit.results import Result, Section

STRICT = ConfigDict(extra="forbid")


@with_config(STRICT)
class CellFigure(TypedDict):
    """A latency or energy figure of a cell with how it was obtained (value None: unavailable, and why)."""

    value: Optional[float]
    method: str                 # measured | estimated | unavailable
    source: Optional[str]


@with_config(STRICT)
class LabRow(TypedDict):
    """One cell: one int8 model on one board. A dict while the cell runs (filled step by step), written as JSON."""

    model: str
    board: str
    device: str
    model_sha256: Optional[str]
    status: Optional[str]       # ok | does-not-fit | failed
    fits: Optional[bool]
    ram_bytes: Optional[int]
    flash_bytes: Optional[int]
    instructions_per_inference: Optional[int]
    latency_ms: Optional[CellFigure]
    energy_uj: Optional[CellFigure]
    bit_exact: Optional[bool]
    error: Optional[str]
    wall_s: Optional[float]
    bit_exact_reference: NotRequired[Optional[str]]
    complete: NotRequired[bool]
    resumed: NotRequired[bool]  # finished by an earlier run of the same matrix


class QuantizedModel(TypedDict):
    """A matrix model's int8 file: given, made by edgekit quantize (``seconds``), or not made (``error``)."""

    int8: Optional[Path]
    quantized: NotRequired[Union[bool, str]]   # True, False (given as int8) or "earlier run"
    seconds: NotRequired[float]
    error: NotRequired[str]


class LabModel(Section):
    name: str
    model: str
    int8: Optional[str]
    quantized: Optional[Union[bool, str]]
    error: Optional[str]


class LabBoard(Section):
    name: str
    device: str
    instances: int


class LabSettings(Section):
    iterations: int
    inputs: int
    parallel: int


class LabTiming(Section):
    wall_s: float
    build_s: float
    run_s: float
    method: str


class LabTable(Result):
    """edgekit lab: every model x board cell with fit, memory, instructions, latency, energy and bit-exactness"""

    SCHEMA: ClassVar[str] = "lab"

    edgekit_lab: str            # the edgekit version that ran the matrix
    matrix: Optional[str]
    models: List[LabModel]
    boards: List[LabBoard]
    settings: LabSettings
    cells: List[LabRow]
    summary: Dict[str, int]     # cells per status (ok, does-not-fit, failed), resumed, cells
    timing: LabTiming
    host: str
    notes: List[str]
