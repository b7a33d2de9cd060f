"""Degenerate calibration: activations that collapse to (near) zero give int8 scales around 1e-8, which LiteRT's
reference kernels abort on (SIGABRT in allocate_tensors) and which no int8 model can use. Found before quantizing,
with the tensors named and the two usual causes: an untrained model, or calibration data that is wrong."""
from __future__ import annotations

import logging
from typing import Dict, List, Mapping

from edgekit.calibration.statistics import TensorStats
from edgekit.errors import CalibrationDataError

log = logging.getLogger(__name__)

NEAR_ZERO = 1e-6   # an activation whose largest |value| stays below this gets an int8 scale below ~4e-9
SHOWN = 6          # tensors named in the message (the rest are counted)


def _short(name: str, limit: int = 70) -> str:
    name = name.split(";")[0]
    return name if len(name) <= limit else "..." + name[-(limit - 3):]


def degenerate_tensors(stats: Mapping[int, TensorStats]) -> Dict[str, List[TensorStats]]:
    """{"near_zero": [...], "constant": [...]}: tensors whose peak |value| < NEAR_ZERO, and (other) tensors that
    held one single value over every calibration sample."""
    near_zero = [s for s in stats.values() if max(abs(s.min), abs(s.max)) < NEAR_ZERO]
    constant = [s for s in stats.values() if s.max == s.min and s not in near_zero]
    return {"near_zero": sorted(near_zero, key=lambda s: max(abs(s.min), abs(s.max))), "constant": constant}


def check_calibration(stats: Mapping[int, TensorStats], samples: int) -> None:
    """Raise one CalibrationDataError naming the collapsed tensors; warn about constant ones alone."""
    found = degenerate_tensors(stats)
    near_zero, constant = found["near_zero"], found["constant"]
    if not near_zero:
        if constant:
            log.warning("%d activation tensor(s) held one value over all %d calibration samples (e.g. %s = %g): "
                        "check that the calibration data varies", len(constant), samples, _short(constant[0].name),
                        constant[0].min)
        return
    lines = [f"{_short(s.name)}: peak |value| {max(abs(s.min), abs(s.max)):.2g}" for s in near_zero[:SHOWN]]
    if len(near_zero) > SHOWN:
        lines.append(f"... and {len(near_zero) - SHOWN} more")
    extra = f"; {len(constant)} other tensor(s) constant over every sample" if constant else ""
    raise CalibrationDataError(
        [f"degenerate calibration: {len(near_zero)} of {len(stats)} activation tensors never exceed {NEAR_ZERO:g}\n"
         f"  over {samples} calibration samples{extra}\n"
         "  (int8 scales below ~4e-9: LiteRT's kernels abort on them and the int8 model could not work):\n"
         + "\n".join(f"  - {line}" for line in lines) + "\n"
         "  Likely cause: an untrained model (random weights, e.g. keras.applications.*(weights=None)) whose "
         "activations\n  shrink layer by layer, or calibration data that is wrong (all zeros, or not preprocessed "
         "as in training)"],
        fix="quantize the trained model (load its weights), and check that --calib holds real inputs preprocessed "
            "as in training (preprocess.json)")
