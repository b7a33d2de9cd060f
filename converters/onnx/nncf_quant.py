"""NNCF post-training quantization of the ONNX graph (no torch C++ extension is built on this path)."""
from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Sequence

import numpy as np

from edgekit.calibration.dataset import InputSpec, Sample
from edgekit.errors import ToolMissingError
from edgekit.quiet import captured_output

log = logging.getLogger(__name__)

# edgekit method -> NNCF RangeEstimatorParametersSet for activations. Only true equivalents:
#   minmax: global min / max over all samples (NNCF MINMAX: MIN of per-sample mins, MAX of maxes).
#   mse:    NNCF HISTOGRAM, its port of torch's HistogramObserver: the range minimising the L2
#           quantization error over a 2048-bin histogram of all values.
NNCF_METHODS = {"minmax": "MINMAX", "mse": "HISTOGRAM"}
NNCF_REFUSED = {
    "entropy": "NNCF has no KL-divergence (entropy) range estimator",
    "percentile": "NNCF's quantile estimator (MEAN_QUANTILE) averages per-sample quantiles; it is not a "
                  "percentile of all calibration values",
}


@dataclass
class NncfSettings:
    method: str
    range_estimator: str
    preset: str = "MIXED"               # asymmetric int8 activations, symmetric per-channel int8 weights
    fast_bias_correction: bool = True   # NNCF's default
    subset_size: int = 0
    ignored_names: List[str] = field(default_factory=list)
    ignored_types: List[str] = field(default_factory=list)

    def to_json(self) -> Dict[str, object]:
        return {"range_estimator": self.range_estimator, "preset": self.preset, "subset_size": self.subset_size,
                "fast_bias_correction": self.fast_bias_correction, "target_device": "ANY",
                "ignored_scope": {"names": self.ignored_names, "types": self.ignored_types}}


def nncf_module():
    try:
        with captured_output(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import nncf
    except ImportError:
        raise ToolMissingError("nncf", "pip install nncf==3.4.0 (or run `make install`)") from None
    return nncf


def nncf_settings(method: str, samples: int, ignored_names: Sequence[str] = (), ignored_types: Sequence[str] = ()) -> NncfSettings:
    return NncfSettings(method, NNCF_METHODS[method], subset_size=samples,
                        ignored_names=list(ignored_names), ignored_types=list(ignored_types))


def quantize(float_path: Path, out_path: Path, samples: List[Sample], specs: List[InputSpec], settings: NncfSettings,
             on_sample: Callable[[int], None]) -> None:
    """nncf.quantize on the onnx.ModelProto with every calibration sample; writes the QDQ model."""
    import onnx

    nncf = nncf_module()
    from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters
    from nncf.quantization.range_estimator import RangeEstimatorParametersSet

    seen = [0]

    def transform(sample: Sample) -> Dict[str, np.ndarray]:
        if seen[0] < len(samples):
            on_sample(1)
        seen[0] += 1
        return {spec.name: np.asarray(value, dtype=np.float32) for spec, value in zip(specs, sample)}

    advanced = AdvancedQuantizationParameters(
        activations_range_estimator_params=getattr(RangeEstimatorParametersSet, settings.range_estimator))
    scope = None
    if settings.ignored_names or settings.ignored_types:
        scope = nncf.IgnoredScope(names=list(settings.ignored_names), types=list(settings.ignored_types), validate=True)
    model = onnx.load(str(float_path))
    with captured_output(fds=(1,)), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantized = nncf.quantize(
            model, nncf.Dataset(samples, transform), preset=getattr(nncf.QuantizationPreset, settings.preset),
            subset_size=settings.subset_size, fast_bias_correction=settings.fast_bias_correction,
            ignored_scope=scope, advanced_parameters=advanced,
        )
    onnx.save(quantized, str(out_path))
