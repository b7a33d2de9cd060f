"""Export stage: any supported model -> a float .tflite reference artifact.

Model kinds: float .tflite, ONNX, Keras .h5/.keras, TF SavedModel folder, PyTorch .pt2
(torch.export.save), TorchScript, or ``package.module:factory`` returning an nn.Module.
Nothing is unpickled from a model file.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Tuple

from edgekit.errors import InvalidModelError
from edgekit.export.detect import ModelKind, detect_kind

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FloatExport:
    """The float reference model and how it was made."""

    tflite: bytes
    kind: ModelKind
    source: str
    route: str
    notes: Tuple[str, ...] = field(default_factory=tuple)


def to_float_tflite(model: str, *, input_shape: Optional[Tuple[int, ...]] = None) -> FloatExport:
    """Load ``model`` and return its float TFLite form (the reference for calibration/parity)."""
    kind = detect_kind(model)
    log.info("model %s detected as %s", model, kind.value)
    if kind is ModelKind.TFLITE:
        from edgekit.export.tflite_source import float_tflite_from_tflite

        return FloatExport(float_tflite_from_tflite(Path(model)), kind, model, "as given")
    if kind in (ModelKind.KERAS, ModelKind.SAVED_MODEL):
        from edgekit.export.tf_source import float_tflite_from_tf

        return FloatExport(float_tflite_from_tf(Path(model), kind), kind, model, "tf.lite.TFLiteConverter (float)")
    if kind is ModelKind.ONNX:
        from edgekit.export.onnx_source import float_tflite_from_onnx

        return FloatExport(float_tflite_from_onnx(Path(model)), kind, model, "onnx2tf (NCHW inputs kept)")
    from edgekit.export.torch_source import float_tflite_from_torch

    data, route = float_tflite_from_torch(model, kind, input_shape)
    return FloatExport(data, kind, model, route)


__all__ = ["FloatExport", "ModelKind", "detect_kind", "to_float_tflite", "InvalidModelError"]
