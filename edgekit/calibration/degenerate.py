"""Degenerate calibration: activations that collapse to (near) zero give int8 scales around 1e-8, which LiteRT's
reference kernels abort on (SIGABRT in allocate_tensors) and which no int8 model can use. Found before quantizing,
in every quantization format (TFLite, ONNX QDQ, Core ML W8A8), with the tensors named and the two usual causes:
an untrained model, or calibration data that is wrong."""
from __future__ import annotations

import logging
import textwrap
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping

from edgekit.calibration.statistics import TensorStats
from edgekit.errors import CalibrationDataError

log = logging.getLogger(__name__)

NEAR_ZERO = 1e-6   # an activation whose largest |value| stays below this gets an int8 scale below ~4e-9
SHOWN = 6          # tensors named in the message (the rest are counted)
# What such scales do in each format (the middle line of the message).
TFLITE_CONSEQUENCE = "int8 scales below ~4e-9: LiteRT's kernels abort on them and the int8 model could not work"
ONNX_CONSEQUENCE = "int8 scales below ~4e-9: the QDQ model would round these activations to noise or zero"
COREML_CONSEQUENCE = ("the PT2E observers clamp int8 scales at 2^-12, so these activations would all quantize to 0 "
                      "and the W8A8 model's outputs would be meaningless")


@dataclass(frozen=True)
class TensorRange:
    """The observed (or calibrated) range of one activation tensor."""

    name: str
    min: float
    max: float

    @property
    def peak(self) -> float:
        return max(abs(self.min), abs(self.max))


def _wrapped(text: str, width: int = 116) -> str:
    """An indented message line broken at spaces so that no console line passes ~120 characters."""
    return "\n".join(textwrap.wrap(text, width=width, initial_indent="  ", subsequent_indent="  "))


def _short(name: str, limit: int = 70) -> str:
    name = name.split(";")[0]
    return name if len(name) <= limit else "..." + name[-(limit - 3):]


def degenerate_ranges(ranges: Iterable[TensorRange]) -> Dict[str, List[TensorRange]]:
    """{"near_zero": [...], "constant": [...]}: tensors whose peak |value| < NEAR_ZERO, and (other) tensors that
    held one single value over every calibration sample."""
    ranges = list(ranges)
    near_zero = [r for r in ranges if r.peak < NEAR_ZERO]
    constant = [r for r in ranges if r.max == r.min and r.peak >= NEAR_ZERO]
    return {"near_zero": sorted(near_zero, key=lambda r: r.peak), "constant": constant}


def degenerate_tensors(stats: Mapping[int, TensorStats]) -> Dict[str, List[TensorRange]]:
    """degenerate_ranges of TFLite activation statistics."""
    return degenerate_ranges(TensorRange(s.name, s.min, s.max) for s in stats.values())


def check_calibration(stats: Mapping[int, TensorStats], samples: int) -> None:
    """TFLite: raise one CalibrationDataError naming the collapsed tensors; warn about constant ones alone."""
    check_ranges([TensorRange(s.name, s.min, s.max) for s in stats.values()], samples, TFLITE_CONSEQUENCE)


def check_ranges(ranges: Iterable[TensorRange], samples: int, consequence: str) -> None:
    """Any format: raise one CalibrationDataError naming the tensors whose range collapsed to ~0, with
    ``consequence`` (what such scales do in this format); warn about tensors that were constant (but not ~0)."""
    ranges = list(ranges)
    found = degenerate_ranges(ranges)
    near_zero, constant = found["near_zero"], found["constant"]
    if not near_zero:
        if constant:
            log.warning("%d activation tensor(s) held one value over all %d calibration samples (e.g. %s = %g): "
                        "check that the calibration data varies", len(constant), samples, _short(constant[0].name),
                        constant[0].min)
        return
    lines = [f"{_short(r.name)}: peak |value| {r.peak:.2g}" for r in near_zero[:SHOWN]]
    if len(near_zero) > SHOWN:
        lines.append(f"... and {len(near_zero) - SHOWN} more")
    extra = f"; {len(constant)} other tensor(s) constant over every sample" if constant else ""
    raise CalibrationDataError(
        [f"degenerate calibration: {len(near_zero)} of {len(ranges)} activation tensors never exceed {NEAR_ZERO:g}\n"
         f"  over {samples} calibration samples{extra}\n"
         + _wrapped(f"({consequence}):") + "\n"
         + "\n".join(f"  - {line}" for line in lines) + "\n"
         "  Likely cause: an untrained model (random weights, e.g. keras.applications.*(weights=None)) whose "
         "activations\n  shrink layer by layer, or calibration data that is wrong (all zeros, or not preprocessed "
         "as in training)"],
        fix="quantize the trained model (load its weights), and check that --calib holds real inputs preprocessed "
            "as in training (preprocess.json)")
