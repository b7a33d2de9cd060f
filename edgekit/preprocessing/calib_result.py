"""The typed calib_check.json of ``edgekit calib-check``: ``CalibCheckFile`` and its parts.

The parts stay dicts while the check runs and the reports are rendered (TypedDicts: every key declared);
``CalibCheckFile`` checks the whole document when it is written.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Union

from pydantic import ConfigDict, Field
from typing_extensions import TypedDict

from edgekit.artifact import DataDescription, HostInfo
from edgekit.parity.result import Accuracy, OutputMetrics
from edgekit.preprocessing.spec import SpecDict
from edgekit.results import Result
from edgekit.results.number import Number
from edgekit.scale.ray_map import Execution

_STRICT = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class CalibThresholds:
    """Verdict limits, declared once.

    max_clipped: share of live activations outside the calibrated range, in the worst tensor, above
    which the set is unrepresentative (1 %: INT8 then saturates 1 value in 100 on live data);
    warn_clipped: above it the verdict is ``check`` (0.1 %).
    max_input_ks: KS distance between calibration and live input values per channel above which the
    inputs themselves are judged to come from a different distribution.
    """

    max_clipped: float = 0.01
    warn_clipped: float = 0.001
    max_input_ks: float = 0.25

    def to_json(self) -> Dict[str, float]:
        return dict(self.__dict__)


class CheckedModel(TypedDict):
    path: str
    sha256: Optional[str]  # None when the model is not a file (a Python object)
    float_sha256: str      # the float .tflite the statistics ran on
    export: str            # how it was exported


class SampleSet(TypedDict, total=False):
    """The calibration or the live data as calib-check read it."""

    __pydantic_config__ = _STRICT  # type: ignore[misc]

    path: str
    samples: int
    fingerprint: str
    skipped: int
    spec: Optional[SpecDict]
    dataset: DataDescription  # --ray: the listed source (kind, items, chunks, ...)


class TensorCheck(TypedDict):
    """One activation tensor: calibrated range against the live values."""

    __pydantic_config__ = _STRICT  # type: ignore[misc]

    index: int
    name: str
    calib_min: Number
    calib_max: Number
    range: List[Number]  # [lo, hi] the range method chose
    live_min: Number
    live_max: Number
    clipped: Number
    clipped_below: Number
    clipped_above: Number
    excess: Number  # how far the live values reach past the range, relative to its width


class ChannelSummary(TypedDict):
    mean: Number
    std: Number
    min: Number
    max: Number
    p1: Number
    p50: Number
    p99: Number


class ChannelDistances(TypedDict):
    """Calibration vs live value distributions of one input channel (``live_sums.distances``)."""

    calib: ChannelSummary
    live: ChannelSummary
    ks: Number
    wasserstein: Number
    wasserstein_rel: Number
    mean_shift_rel: Number


class InputCheck(ChannelDistances):
    """One model input channel of calib_check.json."""

    __pydantic_config__ = _STRICT  # type: ignore[misc]

    channel: Union[int, str]  # the channel index, or "all" for an input that is not an image


class EffectEntry(TypedDict, total=False):
    sha256: str  # of the INT8 model
    outputs: List[OutputMetrics]
    accuracy: Accuracy


class QuantizationEffect(TypedDict, total=False):
    """--effect: INT8 with the calibration ranges vs INT8 with live ranges, both against float on the live data."""

    __pydantic_config__ = _STRICT  # type: ignore[misc]

    available: bool
    reason: str  # when not available
    samples: int
    with_calibration_set: EffectEntry
    with_live_data: EffectEntry


class CalibProvenance(TypedDict):
    created: str
    host: HostInfo
    tools: Dict[str, str]


class CalibCheckFile(Result):
    """calibration data checked against live (deployment) data"""

    SCHEMA = "calib-check"

    verdict: str = Field(description="representative | check | unrepresentative")
    passed: bool
    reasons: List[str]
    thresholds: CalibThresholds
    method: str
    model: CheckedModel
    calib: SampleSet
    live: SampleSet
    worst_tensors: List[str]
    inputs: List[InputCheck]
    tensors: List[TensorCheck]
    effect: Optional[QuantizationEffect] = None
    errors: Dict[str, List[str]]  # calib / live -> the files that were skipped, and why
    execution: Optional[Execution] = None
    provenance: CalibProvenance
