"""onnxruntime static quantization (QDQ, U8S8, per-channel weights) with edgekit's calibration methods.

quantize_static() passes only a few calibration settings to its calibrators (not the histogram size
of Entropy, which stays at 128 bins / 128 quantized bins: a single candidate threshold, i.e. exactly
MinMax). So edgekit runs onnxruntime's own calibrator itself (create_calibrator with every setting),
stores the ranges with onnxruntime's save_tensors_data and hands them to quantize_static through
calibration_cache_path. The ranges, the histogram algorithms and the quantizer are onnxruntime's.
"""
from __future__ import annotations

import contextlib
import io
import logging
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Sequence

import numpy as np

from edgekit.calibration.dataset import InputSpec, Sample
from edgekit.calibration.degenerate import ONNX_CONSEQUENCE, TensorRange, check_ranges
from edgekit.progress import step_progress
from edgekit.quiet import captured_output

log = logging.getLogger(__name__)

ORT_METHODS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile"}
ORT_REFUSED = {"mse": "onnxruntime has no MSE range search (its Distribution method is for float8 only)"}
HISTOGRAM_BINS = 2048          # Entropy and Percentile histogram resolution
ENTROPY_QUANTIZED_BINS = 128   # onnxruntime's default (TensorRT's value). Measured: 256 clipped far more on
                               # mobilenet_like (SQNR 12.8 vs 27.5 dB, top-1 0.73 vs 1.00), 512 worse still
# 8-bit activations stored as uint8 (asymmetric: the same grid as int8 with the zero point moved by 128, so the
# dequantized values are identical). onnxruntime's guidance for x86 CPUs is U8S8; measured here (x86 with
# AVX512-VNNI, 1 thread, mobilenet_like): U8S8 0.064 ms vs S8S8 0.142 ms per inference, SQNR 30.73 dB both.
# NNCF's ONNX output also stores asymmetric activations as uint8.
ACTIVATION_TYPE = "QUInt8"
CHUNK = 16                     # samples per collect_data call: bounds memory, drives the progress bar


@dataclass
class OrtSettings:
    """What is given to onnxruntime, recorded in the manifest and report."""

    method: str
    calibrate_method: str
    calibrator: Dict[str, object]
    quantizer: Dict[str, object] = field(default_factory=dict)
    nodes_to_exclude: List[str] = field(default_factory=list)


def ort_settings(method: str, percentile: float, nodes_to_exclude: Sequence[str] = ()) -> OrtSettings:
    """edgekit method -> onnxruntime CalibrationMethod and calibrator settings (same meaning as edgekit's)."""
    if method == "minmax":
        calibrator = {"symmetric": False, "moving_average": False}
    elif method == "entropy":
        calibrator = {"symmetric": False, "num_bins": HISTOGRAM_BINS, "num_quantized_bins": ENTROPY_QUANTIZED_BINS}
    else:
        # onnxruntime cuts (100 - p) / 200 from each tail; edgekit's --percentile P cuts (100 - P) / 100 from each.
        calibrator = {"symmetric": False, "num_bins": HISTOGRAM_BINS, "percentile": 2.0 * percentile - 100.0}
    quantizer = {"quant_format": "QDQ", "activation_type": ACTIVATION_TYPE, "weight_type": "QInt8", "per_channel": True,
                 "reduce_range": False, "ActivationSymmetric": False, "WeightSymmetric": True}
    return OrtSettings(method, ORT_METHODS[method], calibrator, quantizer, list(nodes_to_exclude))


class SampleReader:
    """onnxruntime CalibrationDataReader over edgekit samples, a window at a time (set_range)."""

    def __init__(self, samples: List[Sample], specs: List[InputSpec], on_sample: Callable[[int], None]) -> None:
        self.samples, self.specs, self.on_sample = samples, specs, on_sample
        self.start, self.end = 0, len(samples)
        self.position = 0

    def set_range(self, start_index: int, end_index: int) -> None:
        self.start, self.end = start_index, min(end_index, len(self.samples))
        self.position = self.start

    def get_next(self):
        if self.position >= self.end:
            return None
        sample = self.samples[self.position]
        self.position += 1
        self.on_sample(1)
        return {spec.name: np.asarray(value, dtype=np.float32) for spec, value in zip(self.specs, sample)}

    def __len__(self) -> int:
        return len(self.samples)


def quantized_op_types() -> List[str]:
    """Op types onnxruntime's quantizer handles (the ones nodes_to_exclude can keep in float)."""
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    return sorted(set(QLinearOpsRegistry) | set(QDQRegistry))


def calibrate(float_path: Path, samples: List[Sample], specs: List[InputSpec], settings: OrtSettings,
              cache_path: Path, on_sample: Callable[[int], None]):
    """Run onnxruntime's calibrator for ``settings`` over all samples; write its ranges to ``cache_path``."""
    from onnxruntime.quantization import CalibrationMethod
    from onnxruntime.quantization.calibrate import create_calibrator, save_tensors_data

    op_types = quantized_op_types()
    reader = SampleReader(samples, specs, on_sample)
    with tempfile.TemporaryDirectory(prefix="edgekit-ortcal-") as work, _quiet():
        calibrator = create_calibrator(
            Path(float_path), op_types, augmented_model_path=str(Path(work) / "augmented.onnx"),
            calibrate_method=CalibrationMethod[settings.calibrate_method], providers=["CPUExecutionProvider"],
            extra_options=dict(settings.calibrator),
        )
        for start in range(0, len(samples), CHUNK):
            reader.set_range(start, start + CHUNK)
            calibrator.collect_data(reader)
        ranges = calibrator.compute_data()
    save_tensors_data(ranges, cache_path)
    return ranges


def tensor_ranges(ranges) -> List[TensorRange]:
    """onnxruntime's calibrated ranges (TensorsData) as edgekit TensorRange records (for the degenerate check):
    the observed extremes (the histogram's edges for Entropy / Percentile, whose chosen range may clip)."""
    found = []
    for name, data in ranges.items():
        edges = getattr(data, "hist_edges", None)
        lo, hi = (edges[0], edges[-1]) if edges is not None and len(edges) else data.range_value
        found.append(TensorRange(name, float(np.min(lo)), float(np.max(hi))))
    return found


def check_not_degenerate(float_path: Path, samples: List[Sample], specs: List[InputSpec], ranges=None) -> None:
    """Refuse calibration whose activation ranges collapsed to ~0 (edgekit.calibration.degenerate), before
    quantizing. ``ranges``: the calibrator's output when there is one; otherwise a MinMax pass of onnxruntime's
    calibrator over the samples gives them (the NNCF engine calibrates inside nncf.quantize)."""
    if ranges is None:
        with tempfile.TemporaryDirectory(prefix="edgekit-ortrange-") as work:
            ranges = calibrate(float_path, samples, specs, ort_settings("minmax", 100.0), Path(work) / "ranges.json",
                               step_progress("range check", len(samples)))
    check_ranges(tensor_ranges(ranges), len(samples), ONNX_CONSEQUENCE)


def quantize(float_path: Path, out_path: Path, cache_path: Path, settings: OrtSettings) -> None:
    """quantize_static with the ranges of calibrate(): QDQ, int8 activations, per-channel int8 weights."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    q = settings.quantizer
    with _quiet(), warnings.catch_warnings(), _without_ort_root_warnings():
        warnings.simplefilter("ignore")
        quantize_static(
            str(float_path), str(out_path), calibration_data_reader=None, quant_format=QuantFormat.QDQ,
            per_channel=q["per_channel"], reduce_range=q["reduce_range"],
            activation_type=getattr(QuantType, q["activation_type"]), weight_type=QuantType.QInt8,
            nodes_to_exclude=list(settings.nodes_to_exclude),
            calibrate_method=CalibrationMethod[settings.calibrate_method], calibration_cache_path=str(cache_path),
            extra_options={"ActivationSymmetric": q["ActivationSymmetric"], "WeightSymmetric": q["WeightSymmetric"]},
        )


@contextlib.contextmanager
def _quiet():
    """onnxruntime's calibrators print() their progress; keep stdout clean (fd level and sys.stdout)."""
    with captured_output(fds=(1,)), contextlib.redirect_stdout(io.StringIO()):
        yield


@contextlib.contextmanager
def _without_ort_root_warnings():
    """onnxruntime.quantization logs through the root logger (e.g. "consider pre-processing", which
    edgekit has done); drop those records while it runs, keep everything else."""
    def keep(record: logging.LogRecord) -> bool:
        return "/onnxruntime/quantization/" not in record.pathname.replace("\\", "/")

    root = logging.getLogger()
    root.addFilter(keep)
    try:
        yield
    finally:
        root.removeFilter(keep)
