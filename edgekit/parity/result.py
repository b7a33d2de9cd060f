"""``ParityReport``: the typed result of a parity comparison (reference vs candidate), written as parity.json."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from pydantic import ConfigDict, Field, computed_field, model_serializer

from edgekit.parity.tolerance import Tolerance
from edgekit.results import JsonObject, Result, Section
from edgekit.results.number import Number


class OutputMetrics(Section):
    """Agreement of one output over all samples; optional metrics are left out of the JSON when not computed."""

    name: str
    cosine: Number
    sqnr_db: Number
    rmse: Number
    mae: Number
    rel_l2: Number
    max_abs: Number
    kind: Optional[str] = Field(None, description="how the output is judged (edgekit.parity.output_kind)")
    kind_reason: Optional[str] = Field(None, description="why that kind was chosen (detected, or --output-kind)")
    top1_agreement: Optional[Number] = Field(None, description="class_scores outputs only")
    topk_agreement: Optional[Number] = Field(None, description="detection_scores: share of the top-10 anchors kept")
    mask_iou: Optional[Number] = Field(None, description="mask outputs: foreground intersection over union")
    bit_exact_fraction: Optional[Number] = Field(None, description="both sides integer tensors only")
    differing_elements: Optional[int] = Field(None, description="both sides integer tensors only")

    @model_serializer(mode="wrap")
    def _without_absent_metrics(self, handler):
        return {k: v for k, v in handler(self).items() if v is not None}

    def metrics(self) -> Dict[str, float]:
        """The computed metrics by name (what ``Tolerance.failures`` checks)."""
        return {k: v for k, v in self.model_dump(exclude={"name", "kind", "kind_reason"}).items() if v is not None}


class Accuracy(Section):
    """Top-1 accuracy of both models on labelled samples."""

    labels: int
    reference_top1: float
    candidate_top1: float
    drop: float

    @classmethod
    def of(cls, labels: int, reference_top1: float, candidate_top1: float) -> "Accuracy":
        return cls(labels=labels, reference_top1=reference_top1, candidate_top1=candidate_top1,
                   drop=reference_top1 - candidate_top1)


class ModelDescription(Section):
    """Which model ran on which runtime and kernels (each runner adds its own facts, e.g. inputs, compute units)."""

    model_config = ConfigDict(extra="allow")

    path: str
    sha256: Optional[str] = None
    format: str
    runtime: str
    kernels: Optional[str] = None

    @model_serializer(mode="wrap")
    def _without_absent_facts(self, handler):
        return {k: v for k, v in handler(self).items() if v is not None or k in ("sha256",)}


# what a comparison ran on: dataset descriptions (their keys depend on the source kind), how it ran on Ray, the
# backend's quantization summary; free-form by design, rendered by edgekit.scale.report / edgekit.report
ParityData = Dict[str, Any]


class ParityReport(Result):
    """FP32 vs INT8 (or any reference vs candidate) parity on the same inputs."""

    SCHEMA = "parity"
    model_config = ConfigDict(populate_by_name=True)

    samples: int
    tolerance: Tolerance = Field(alias="thresholds")
    failures: List[str]
    outputs: List[OutputMetrics]
    accuracy: Optional[Accuracy] = None
    reference: ModelDescription
    candidate: ModelDescription
    data: Optional[ParityData] = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        return not self.failures

    def __bool__(self) -> bool:
        return self.passed

    def with_data(self, data: Optional[ParityData]) -> "ParityReport":
        """The same report, with ``data`` describing what it ran on."""
        return self.model_copy(update={"data": data})

    def to_dict(self) -> JsonObject:
        order = ("passed", "samples", "thresholds", "failures", "outputs", "accuracy", "reference", "candidate", "data")
        from edgekit.report import json_safe

        body = self.model_dump(mode="json", by_alias=True, exclude={"data"})
        body["data"] = json_safe(self.data)
        return {k: body[k] for k in order}

    @classmethod
    def from_json(cls, document: Mapping[str, object]) -> "ParityReport":
        """A report read back from parity.json (the stamp and the derived ``passed`` dropped)."""
        return cls.model_validate({k: v for k, v in document.items() if k not in ("schema", "passed")})
