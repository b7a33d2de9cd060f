"""The typed layers.json of ``--debug`` / ``--per-layer``: ``LayersFile`` and the rows it is made of.

A row stays a dict while the report is built and read (``LayerRow``, a TypedDict: each tracer adds its own
descriptive fields, the core adds the metrics); ``LayersFile`` checks the whole document when it is written.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Union

from pydantic import ConfigDict, model_serializer
from typing_extensions import TypedDict

from edgekit.artifact import HostInfo
from edgekit.results import Result, Section
from edgekit.results.number import Number


class LayerRow(TypedDict, total=False):
    """One compared tensor (a model input or a candidate op output); see ``edgekit.parity.layers.LayerReport``."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    index: int
    op: str
    tensor: str
    shape: Optional[List[int]]
    dtype: str
    scale: Union[float, str]        # "float" when the output stayed float, "per-axis" for per-channel grids
    zero_point: Union[int, str]
    match: str                      # name | order | inserted | unmatched (ONNX adds node)
    reference_tensor: Optional[str]
    node: Optional[str]             # ONNX: the node name
    compared_tensor: str            # ONNX / Core ML: the dequantized tensor that was compared
    sqnr_db: Optional[Number]
    cosine: Optional[Number]
    max_abs: Optional[Number]
    rmse: Optional[Number]
    channel_sqnr_db: Optional[Number]
    grid_sqnr_db: Optional[Number]
    clipped_fraction: Optional[Number]
    input_sqnr_db: Optional[Number]
    sqnr_drop_db: Optional[Number]
    local_sqnr_db: Optional[Number]
    likely_cause: Optional[str]
    rank: Optional[int]


class RankedLayer(Section):
    """One entry of the ranking, most damaged first."""

    rank: int
    index: int
    op: str
    tensor: str
    local_sqnr_db: Number
    sqnr_drop_db: Number


class TracedModel(TypedDict):
    """One side of the comparison (``Trace.describe()``)."""

    source: str
    sha256: str
    ops: int


class OutputCheck(TypedDict):
    sqnr_db_as_written: Number
    sqnr_db_optimized: Number


class OptimizedRuntime(TypedDict):
    """ONNX: each model output also compared in onnxruntime's optimized session (what a deployment runs)."""

    session: str
    outputs: Dict[str, OutputCheck]


class LayerMeta(TypedDict, total=False):
    """What a comparison ran on (``LayerReport.meta``); the fields of layers.json beside the rows."""

    format: str
    reference: TracedModel
    candidate: TracedModel
    samples_given: int
    samples_used: int
    kernels: str
    matched: Dict[str, int]
    sqnr_cap_db: float
    not_applicable: Dict[str, str]
    created: str
    host: Dict[str, str]
    tools: Dict[str, str]
    optimized_runtime: OptimizedRuntime  # ONNX only (``Trace.extra_meta``)
    notes: List[str]


class LayersFile(Result):
    """every intermediate tensor of a float and a quantized model compared"""

    SCHEMA = "layers"

    kind: str
    format: str
    reference: TracedModel
    candidate: TracedModel
    samples_given: int
    samples_used: int
    kernels: str
    matched: Dict[str, int]
    sqnr_cap_db: float
    not_applicable: Dict[str, str]
    created: str
    host: HostInfo
    tools: Dict[str, str]
    optimized_runtime: Optional[OptimizedRuntime] = None
    notes: Optional[List[str]] = None
    damage_metric: str
    inputs: List[LayerRow]
    ranking: List[RankedLayer]
    layers: List[LayerRow]

    @model_serializer(mode="wrap")
    def _without_absent_extras(self, handler):
        return {k: v for k, v in handler(self).items() if v is not None or k not in ("optimized_runtime", "notes")}
