"""The typed parity.json of ``edgekit preprocess-parity``: ``PreprocessParityFile`` and its parts.

The parts stay dicts while the comparison runs and the reports are rendered (TypedDicts: every key declared);
``PreprocessParityFile`` checks the whole document when it is written.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

from pydantic import ConfigDict, model_serializer
from typing_extensions import TypedDict

from edgekit.artifact import HostInfo
from edgekit.parity.result import ModelDescription, OutputMetrics
from edgekit.preprocessing.base import PipelineDescription
from edgekit.results import JsonObject, Result
from edgekit.results.number import Number
from edgekit.scale.ray_map import Execution

_STRICT = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Thresholds:
    """Gates for preprocess-parity (None: not checked). Declared once, used by the CLI and testing API.

    Defaults: mean difference at most half an input step and PSNR >= 40 dB (two correct
    implementations differ by rounding only: < 0.5 LSB on average, PSNR > 45 dB), and at most
    1 % of predictions flipped when a model is given.
    """

    max_mean_abs_lsb: Optional[float] = 0.5
    max_abs_lsb: Optional[float] = None
    min_psnr_db: Optional[float] = 40.0
    max_flip_rate: Optional[float] = 0.01
    max_mean_abs: Optional[float] = None  # tensor units (for pipelines without a spec)
    allow_unreadable: int = 0  # files neither pipeline could read that still let the run pass

    def to_json(self) -> Dict[str, Optional[float]]:
        return dict(self.__dict__)


class ImageMetrics(TypedDict, total=False):
    """Differences between the two tensors of one image (the ``*_lsb`` ones only when a spec gives the step)."""

    __pydantic_config__ = _STRICT  # type: ignore[misc]

    max_abs: Number
    mean_abs: Number
    rmse: Number
    psnr_db: Number
    identical: bool
    max_abs_lsb: Number
    mean_abs_lsb: Number
    over_1_lsb: Number


class ImagePrediction(TypedDict):
    """The model's top-1 class on both tensors of one image."""

    reference_class: int
    candidate_class: int
    flipped: bool


class ImageRow(TypedDict, total=False):
    """One image of parity.json (``ImageDiff.to_json``: empty parts left out)."""

    __pydantic_config__ = _STRICT  # type: ignore[misc]

    name: str
    status: str  # compared | shape_mismatch | reference_error | candidate_error | both_error
    reference_shape: List[int]
    candidate_shape: List[int]
    metrics: ImageMetrics
    errors: Dict[str, str]  # side -> why it could not read the file
    model: ImagePrediction


class Aggregate(TypedDict, total=False):
    """Totals over every compared image (element-weighted means); see ``PixelSums.aggregate``."""

    __pydantic_config__ = _STRICT  # type: ignore[misc]

    images: int
    compared: int
    status_counts: Dict[str, int]
    elements: int
    max_abs: Number
    mean_abs: Number
    rmse: Number
    psnr_db: Number
    psnr_peak: str  # only without a spec: PSNR against the reference's own value range
    identical_images: int
    max_abs_lsb: Number
    mean_abs_lsb: Number
    over_1_lsb: Number


class FlippedImage(TypedDict):
    image: str
    reference: int
    candidate: int


class LabelAccuracy(TypedDict):
    labels: int
    reference_top1: float
    candidate_top1: float


class ModelEffect(TypedDict, total=False):
    """The model run on both tensors of every compared image: output drift, top-1 flips, accuracy."""

    __pydantic_config__ = _STRICT  # type: ignore[misc]

    model: ModelDescription
    images: int
    outputs: List[OutputMetrics]
    top1_agreement: float
    flip_rate: float
    flipped: int
    flipped_images: List[FlippedImage]
    accuracy: LabelAccuracy


class ImageSet(TypedDict):
    path: Optional[str]
    count: int
    sha256: str  # over the file names and contents


class ParityProvenance(TypedDict):
    created: str
    host: HostInfo
    tools: Dict[str, str]
    images: ImageSet


class PreprocessParityFile(Result):
    """one preprocessing implementation against another, image by image"""

    SCHEMA = "preprocess-parity"

    passed: bool
    failures: List[str]
    thresholds: Thresholds
    units: str
    aggregate: Aggregate
    model: Optional[ModelEffect] = None
    # the diagnosis' shape is its search's own (white box: perturbation steps and causes; black box: both sides
    # fitted from their tensors, with the fix as a spec); edgekit.preprocessing.diagnose / blackbox write it
    diagnosis: Optional[JsonObject] = None
    reference: PipelineDescription
    candidate: PipelineDescription
    images: List[ImageRow]
    execution: Optional[Execution] = None
    provenance: ParityProvenance

    @model_serializer(mode="wrap")
    def _without_absent_execution(self, handler):
        return {k: v for k, v in handler(self).items() if v is not None or k != "execution"}
