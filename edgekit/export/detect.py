"""Recognise what kind of model a path (or ``module:factory``) is, by content, not only suffix."""
from __future__ import annotations

import enum
import re
import zipfile
from pathlib import Path

from edgekit.errors import InvalidModelError

FACTORY_PATTERN = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


class ModelKind(enum.Enum):
    TFLITE = "tflite"
    ONNX = "onnx"
    KERAS = "keras"
    SAVED_MODEL = "savedmodel"
    PT2 = "pt2"
    TORCHSCRIPT = "torchscript"
    TORCH_FACTORY = "torch-factory"
    MLPACKAGE = "mlpackage"  # Core ML package folder (evaluated by edgekit.coreml, not an input to quantize)


SUPPORTED = (
    "a float .tflite, an .onnx file, a Keras .h5/.keras file, a TF SavedModel folder, "
    "a PyTorch .pt2 (torch.export.save), a TorchScript file (torch.jit.save), "
    "or package.module:factory returning an nn.Module"
)


def detect_source_kind(model: str) -> ModelKind:
    """detect_kind for a model to export: a Core ML package is an output of edgekit, not a source."""
    kind = detect_kind(model)
    if kind is ModelKind.MLPACKAGE:
        raise InvalidModelError(f"{model} is a Core ML package, an output format edgekit cannot convert from",
                                fix="quantize the source model (PyTorch, ONNX, Keras, float .tflite) instead")
    return kind


def detect_kind(model: str) -> ModelKind:
    path = Path(model)
    if not path.exists():
        if FACTORY_PATTERN.match(model):
            return ModelKind.TORCH_FACTORY
        raise InvalidModelError(f"model {model} does not exist", fix=f"pass {SUPPORTED}")
    if path.is_dir():
        if (path / "saved_model.pb").is_file() or (path / "saved_model.pbtxt").is_file():
            return ModelKind.SAVED_MODEL
        if (path / "Manifest.json").is_file() or path.suffix.lower() == ".mlpackage":
            return ModelKind.MLPACKAGE  # edgekit.coreml checks the contents and names what is missing
        raise InvalidModelError(f"folder {model} is not a TF SavedModel (no saved_model.pb)", fix=f"pass {SUPPORTED}")
    try:
        with open(path, "rb") as handle:
            head = handle.read(16)
    except OSError as exc:
        raise InvalidModelError(f"cannot read model {model}: {exc.strerror}") from exc
    if len(head) == 0:
        raise InvalidModelError(f"model file {model} is empty", fix=f"pass {SUPPORTED}")
    if head[4:8] == b"TFL3":
        return ModelKind.TFLITE
    if head.startswith(HDF5_MAGIC):
        return ModelKind.KERAS
    suffix = path.suffix.lower()
    if suffix == ".tflite" and not head.startswith(b"PK"):
        # checked before the zip test: a .tflite with metadata carries a zip of its associated files at its END,
        # so a damaged identifier would otherwise be reported as "a zip archive"
        raise InvalidModelError(
            f"{model} is not a TFLite flatbuffer (bytes 4-8 are {head[4:8]!r}, not the 'TFL3' identifier); "
            "it may be truncated or corrupt",
            fix="re-export the model",
        )
    if zipfile.is_zipfile(path):
        return _zip_kind(path)
    if suffix == ".onnx":
        return ModelKind.ONNX
    if suffix in (".h5", ".hdf5", ".keras"):
        raise InvalidModelError(f"{model} is not a valid Keras file; it may be truncated or corrupt", fix="re-save the model")
    if suffix in (".pt", ".pth", ".bin", ".pkl") or head[:1] == b"\x80":
        raise InvalidModelError(
            f"{model} looks like a pickled Python object; edgekit never unpickles model files",
            fix="save the model with torch.export.save(...) to a .pt2 or torch.jit.save(...), or pass package.module:factory",
        )
    raise InvalidModelError(f"cannot tell what kind of model {model} is", fix=f"pass {SUPPORTED}")


def _zip_kind(path: Path) -> ModelKind:
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise InvalidModelError(f"{path} is a damaged archive: {exc}", fix="re-save the model") from exc
    tails = {n.split("/", 1)[1] if "/" in n else n for n in names}
    if any(t.startswith("models/") or t == "archive_format" or t.endswith("serialized_exported_program.json") for t in tails) or any(
        "/models/" in n for n in names
    ):
        return ModelKind.PT2
    if any(t.startswith("code/") for t in tails) and "data.pkl" in tails:
        return ModelKind.TORCHSCRIPT
    if "config.json" in tails and any(t.endswith(".weights.h5") for t in tails):
        return ModelKind.KERAS
    if "data.pkl" in tails:
        raise InvalidModelError(
            f"{path} is a torch.save() pickle, which edgekit does not unpickle",
            fix="save with torch.export.save(...) to a .pt2 or torch.jit.save(...), or pass package.module:factory",
        )
    raise InvalidModelError(f"{path} is a zip archive but not a model edgekit knows", fix=f"pass {SUPPORTED}")
