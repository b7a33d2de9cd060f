"""Export stage: any supported model -> a float .tflite reference artifact.

Model kinds: float .tflite, ONNX, Keras .h5/.keras, TF SavedModel folder, PyTorch .pt2
(torch.export.save), TorchScript, or ``package.module:factory`` returning an nn.Module.
Nothing is unpickled from a model file.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Tuple

from edgekit.errors import InvalidModelError
from edgekit.export.detect import ModelKind, detect_kind, detect_source_kind

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
    """Load ``model`` and return its float TFLite form (the reference for calibration/parity).

    Exports of model files are cached by (source sha256, kind, input shape, converter versions): the
    export is most of a quantize run's time, and re-running with another --method should not repeat it.
    """
    kind = detect_source_kind(model)
    log.info("model %s detected as %s", model, kind.value)
    key = _cache_key(model, kind, input_shape)
    cached = _load_cached(key, kind, model) if key else None
    if cached is not None:
        return cached
    result = _export(model, kind, input_shape)
    if key:
        _save_cached(key, result)
    return result


def _cache_key(model: str, kind: ModelKind, input_shape: Optional[Tuple[int, ...]]) -> Optional[str]:
    from edgekit import __version__
    from edgekit.provenance import sha256_file, tool_versions

    if kind is ModelKind.TORCH_FACTORY or not Path(model).exists():
        return None  # code, not a file: it can change without a file hash noticing
    versions = sorted(tool_versions().items())
    text = f"export-v2:{__version__}:{kind.value}:{sha256_file(Path(model))}:{input_shape}:{versions}"
    return hashlib.sha256(text.encode()).hexdigest()


def _cache_dir() -> Path:
    from edgekit.calibration.statistics import cache_dir

    return cache_dir().parent / "exports"


def _load_cached(key: str, kind: ModelKind, model: str) -> Optional[FloatExport]:
    data_path, meta_path = _cache_dir() / f"{key}.tflite", _cache_dir() / f"{key}.json"
    try:
        meta = json.loads(meta_path.read_text())
        data = data_path.read_bytes()
    except (OSError, ValueError):
        return None
    if hashlib.sha256(data).hexdigest() != meta.get("sha256"):
        log.warning("ignoring a damaged export cache entry %s", key[:12])
        return None
    log.info("float export taken from cache %s", key[:12])
    return FloatExport(data, kind, model, meta["route"], tuple(meta.get("notes", ())))


def _save_cached(key: str, result: FloatExport) -> None:
    folder = _cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, content in ((f"{key}.tflite", result.tflite),
                              (f"{key}.json", json.dumps({"route": result.route, "notes": list(result.notes),
                                                          "sha256": hashlib.sha256(result.tflite).hexdigest()}).encode())):
            tmp = folder / f".{name}.{os.getpid()}.tmp"
            tmp.write_bytes(content)
            os.replace(tmp, folder / name)
    except OSError as exc:
        log.warning("could not cache the float export: %s", exc)


def _export(model: str, kind: ModelKind, input_shape: Optional[Tuple[int, ...]]) -> FloatExport:
    if kind is ModelKind.TFLITE:
        from edgekit.export.fold_constants import fold_constants
        from edgekit.export.tflite_source import float_tflite_from_tflite

        folded = fold_constants(float_tflite_from_tflite(Path(model)), model)
        if not folded.folded:
            return FloatExport(folded.data, kind, model, "as given")
        return FloatExport(folded.data, kind, model, "edgekit constant folding (weights as float32)", (folded.note,))
    if kind in (ModelKind.KERAS, ModelKind.SAVED_MODEL):
        from edgekit.export.tf_source import float_tflite_from_tf

        return FloatExport(float_tflite_from_tf(Path(model), kind), kind, model, "tf.lite.TFLiteConverter (float)")
    if kind is ModelKind.ONNX:
        from edgekit.export.onnx_source import float_tflite_from_onnx

        return FloatExport(float_tflite_from_onnx(Path(model), input_shape), kind, model, "onnx2tf (NCHW inputs kept)")
    from edgekit.export.torch_source import float_tflite_from_torch

    data, route = float_tflite_from_torch(model, kind, input_shape)
    return FloatExport(data, kind, model, route)


__all__ = ["FloatExport", "ModelKind", "detect_kind", "to_float_tflite", "InvalidModelError"]
