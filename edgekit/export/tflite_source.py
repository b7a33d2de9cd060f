"""A .tflite given as the model: it must be float (it is the reference for calibration)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from edgekit.errors import InvalidModelError
from edgekit.tflite_model import TFLiteModel


def float_tflite_from_tflite(path: Path) -> bytes:
    model = TFLiteModel.load(path)
    quantized = [t.name for t in model.inputs + model.outputs if t.is_quantized or t.dtype != np.float32]
    if quantized:
        raise InvalidModelError(
            f"{path} is already quantized (non-float inputs/outputs: {quantized})",
            fix="pass the float model; use `edgekit parity` to check an existing int8 model",
        )
    return model.data
