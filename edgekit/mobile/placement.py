"""Typed results of `edgekit compile --target gpu` (gpu.json) and `--target ane` (coreml_placement.json)."""
from __future__ import annotations

from typing import Dict, List, Literal, Optional

from edgekit.results import Result, Section


class AnalyzerOp(Section):
    """One op line of TF's model analyzer, with the GPU compatibility warning printed after it (if any)."""

    subgraph: int
    index: int
    name: str
    warning: Optional[str] = None


class AnalyzerReport(Section):
    ops: List[AnalyzerOp]
    model_compatible: Optional[bool]  # None: the analyzer printed no verdict
    summary: str


class AnalyzerVerdict(Section):
    model_compatible: Optional[bool]
    summary: str
    warnings: int


class OpPlacement(Section):
    index: int
    op: str
    output: str
    macs: int
    analyzer: str            # "accepted" | the analyzer's warning
    delegate_rule: str       # "accepted" | why the delegate's rules refuse it
    on_gpu: bool             # after partitioning
    accepted: bool           # by both the analyzer and the delegate's rules


class ModelFile(Section):
    path: str
    sha256: str


class GpuPlacement(Result):
    """which ops of a .tflite LiteRT's GPU delegate takes (`edgekit compile --target gpu`)"""

    SCHEMA = "gpu-placement"

    target: Literal["gpu"] = "gpu"
    source: str
    analyzer: AnalyzerVerdict
    ops: List[OpPlacement]
    ops_total: int
    ops_accepted: int
    partitions: int
    partition_sizes: List[int]
    ops_on_gpu: int
    macs_total: int
    macs_on_cpu: int
    macs_on_cpu_share: float
    note: str
    model: ModelFile


class CoremlOp(Section):
    index: int
    op: str
    outputs: List[str]
    neural_engine: str


class CoremlPlacement(Result):
    """the ops of a Core ML program and where they may run (`edgekit compile --target ane`)"""

    SCHEMA = "coreml-placement"

    target: Literal["ane"] = "ane"
    model: str
    opset: str
    ops: List[CoremlOp]
    op_counts: Dict[str, int]
    source: str
