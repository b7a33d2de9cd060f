"""TFLite backend: full-int8 .tflite (int8 I/O, per-channel int8 weights, int32 bias)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Dict, List, Tuple

from edgekit.converters import CONVERTERS
from edgekit.errors import UnsupportedOpError
from edgekit.support import OpSupport, SupportReport
from edgekit.tflite_model import TFLiteModel

from .int8 import QuantizedTensor, calibrated_flatbuffer, inspect_int8, quantize_calibrated
from .ops import int8_verdict

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Int8Result:
    tflite: bytes
    tensors: List[QuantizedTensor]
    ops: List[str]
    support: SupportReport


@CONVERTERS.register("tflite")
class TFLiteInt8Converter:
    """Float .tflite + activation ranges -> full-int8 .tflite."""

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
