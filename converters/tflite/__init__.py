"""TFLite backend: full-int8 .tflite (int8 I/O, per-channel int8 weights, int32 bias)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Dict, List, Tuple

from edgekit.calibration.ranges import choose_ranges
from edgekit.calibration.statistics import cache_key, collect_statistics
from edgekit.converters import CONVERTERS
from edgekit.errors import UnsupportedOpError
from edgekit.export import to_float_tflite
from edgekit.parity.runners import TFLiteRunner
from edgekit.provenance import sha256_bytes
from edgekit.quantize_backend import FloatReference, QuantizedModel, QuantizeInputs
from edgekit.support import OpSupport, SupportReport
from edgekit.tflite_model import TFLiteModel

from .int8 import QuantizedTensor, calibrated_flatbuffer, inspect_int8, quantize_calibrated
from .ops import int8_verdict
from .report import tflite_sections

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Int8Result:
    tflite: bytes
    tensors: List[QuantizedTensor]
    ops: List[str]
    support: SupportReport


@CONVERTERS.register("tflite")
class TFLiteInt8Converter:
    """Any supported model -> float .tflite reference -> full-int8 .tflite (activation ranges from --method)."""

    name = "tflite"
    filename = "model_int8.tflite"
    target = "tflite-int8"
    stage = "quantize"

    def check_support(self, model: TFLiteModel, target: str = target) -> SupportReport:
        report = SupportReport(target)
        for op in model.ops:
            outputs = [model.tensor(o).name for o in op.outputs if o >= 0]
            supported, reason = int8_verdict(op.name)
            location = f"op #{op.index} -> tensor '{outputs[0] if outputs else '?'}'"
            report.ops.append(OpSupport(op.name, location, supported, reason))
        return report

    def option_problems(self, options) -> List[str]:
        problems = []
        if options.weights != "int8":
            problems.append(f"--weights {options.weights} (TFLite weights are int8)")
        if options.activations != "int8":
            problems.append(f"--activations {options.activations} (use int8)")
        for flag, value in (("--engine", options.engine), ("--deployment-target", options.deployment_target)):
            if value is not None:
                problems.append(f"{flag} {value} (Core ML / ONNX only)")
        if options.compute_units != "all":
            problems.append(f"--compute-units {options.compute_units} (Core ML only)")
        if options.debug or options.fallback != "none" or options.keep_float:
            problems.append("--debug / --fallback / --keep-float (not available yet)")
        return problems

    def export(self, model: str, options) -> FloatReference:
        exported = to_float_tflite(model, input_shape=options.input_shape)
        float_model = TFLiteModel(exported.tflite, source=f"{model} (float reference)")
        sha = sha256_bytes(float_model.data)
        support = self.check_support(float_model)
        if not support.ok:
            raise UnsupportedOpError(support, target="int8 TFLite")
        return FloatReference(
            runner=TFLiteRunner(float_model, kernels="reference", sha256=sha), kind=exported.kind.value,
            route=exported.route, main_file="model_float.tflite", format="tflite-float32",
            files={"model_float.tflite": float_model.data}, sha256=sha, handle=float_model, notes=exported.notes,
        )

    def quantize(self, reference: FloatReference, inputs: QuantizeInputs, options) -> QuantizedModel:
        float_model: TFLiteModel = reference.handle
        stats = collect_statistics(
            float_model, inputs.calib_samples, key=cache_key(reference.sha256, inputs.calib_set.fingerprint),
            progress=inputs.progress("calibrating", 2 * len(inputs.calib_samples)),
        )
        ranges = choose_ranges(stats, options.method, options.range_options)
        result = self.convert(float_model, ranges)
        int8_model = TFLiteModel(result.tflite, source=self.filename)
        return QuantizedModel(
            runner=TFLiteRunner(int8_model, kernels="reference", sha256=sha256_bytes(result.tflite)),
            main_file=self.filename, format="tflite-int8", files={self.filename: result.tflite},
            report_lines=tflite_sections(stats, ranges, result), handle=result,
        )

    def convert(self, model: TFLiteModel, ranges: Dict[int, Tuple[float, float]]) -> Int8Result:
        """Raises UnsupportedOpError (the whole report) if any op cannot be int8."""
        pre = self.check_support(model)
        if not pre.ok:
            raise UnsupportedOpError(pre, target="int8 TFLite")
        quantized = quantize_calibrated(calibrated_flatbuffer(model.data, ranges))
        post, tensors, ops = inspect_int8(quantized)
        if not post.ok:
            raise UnsupportedOpError(post, target="int8 TFLite")
        return Int8Result(quantized, tensors, ops, post)
