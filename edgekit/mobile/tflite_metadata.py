"""TFLite model metadata (the flatbuffer LiteRT, Android Studio's ML Model Binding and MediaPipe Tasks read).

Written the way the metadata populator writes it, with the generated schema module of the metadata flatbuffer
(``mediapipe/tasks/metadata/metadata_schema_py_generated.py``; mediapipe's own writers do not import in the
1.2.2 wheel):

- a ``ModelMetadata`` flatbuffer (file identifier ``M001``) stored in a model buffer named by the model's
  ``metadata`` entry ``TFLITE_METADATA``;
- associated files (labels, provenance) appended to the model as an uncompressed zip archive, which LiteRT
  ignores and metadata readers open.

Only features of metadata schema 1.0.0 are used (min_parser_version 1.0.0).
"""
from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
from typing_extensions import TypedDict

from edgekit.errors import ToolMissingError, UserError
from edgekit.results import JsonObject

METADATA_NAME = "TFLITE_METADATA"
METADATA_IDENTIFIER = b"M001"
MIN_PARSER_VERSION = "1.0.0"
LABEL_FILE = "labels.txt"
PROVENANCE_FILE = "edgekit_provenance.json"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed: the same inputs give the same bytes


def schema():
    """The generated metadata schema module (ships in the mediapipe wheel)."""
    try:
        from mediapipe.tasks.metadata import metadata_schema_py_generated as fb
    except ImportError:
        raise ToolMissingError("mediapipe (TFLite metadata schema)", "pip install mediapipe==1.2.2 (or run `make install`)") from None
    return fb


@dataclass(frozen=True)
class ModelInfo:
    """What the app developer sees: name, description, version, author, license."""

    name: Optional[str] = None
    description: Optional[str] = None
    version: Optional[str] = None
    author: Optional[str] = None
    license: Optional[str] = None

    def given(self) -> Dict[str, str]:
        return {k: v for k, v in self.__dict__.items() if v}


@dataclass(frozen=True)
class ImageInputInfo:
    """An image input: color space, size and normalization on 0..255 pixels (from the preprocessing spec)."""

    color: str                      # rgb | bgr | grayscale
    height: int
    width: int
    mean: Sequence[float]           # (pixel - mean) / std gives the model's float input
    std: Sequence[float]
    spec_name: str = ""


@dataclass(frozen=True)
class TensorInfoForMetadata:
    name: str
    dtype: str                      # int8 | uint8 | float32 ...
    scale: float = 0.0
    zero_point: int = 0


@dataclass
class MetadataContent:
    info: ModelInfo
    inputs: List[TensorInfoForMetadata]
    outputs: List[TensorInfoForMetadata]
    image: Optional[ImageInputInfo] = None          # describes inputs[0]
    labels: Optional[List[str]] = None              # class names of the classification output
    label_output: Optional[int] = None              # index of that output
    provenance: Dict[str, Any] = field(default_factory=dict)  # written as edgekit_provenance.json (the caller's facts)


def _color_space(fb, color: str) -> int:
    return {"rgb": fb.ColorSpaceType.RGB, "grayscale": fb.ColorSpaceType.GRAYSCALE}.get(color, fb.ColorSpaceType.UNKNOWN)


def _input_metadata(fb, tensor: TensorInfoForMetadata, image: Optional[ImageInputInfo]):
    meta = fb.TensorMetadataT()
    meta.name = tensor.name
    content = fb.ContentT()
    quant = (f" Quantized: real = {tensor.scale:.9g} * (q - {tensor.zero_point})." if tensor.scale else "")
    if image is None:
        meta.description = f"Input tensor ({tensor.dtype}).{quant}"
        content.contentPropertiesType = fb.ContentProperties.FeatureProperties
        content.contentProperties = fb.FeaturePropertiesT()
        meta.content = content
        return meta
    props = fb.ImagePropertiesT()
    props.colorSpace = _color_space(fb, image.color)
    size = fb.ImageSizeT()
    size.width, size.height = image.width, image.height
    props.defaultSize = size
    content.contentPropertiesType = fb.ContentProperties.ImageProperties
    content.contentProperties = props
    meta.content = content
    norm = fb.ProcessUnitT()
    norm.optionsType = fb.ProcessUnitOptions.NormalizationOptions
    norm.options = fb.NormalizationOptionsT()
    norm.options.mean = [float(v) for v in image.mean]
    norm.options.std = [float(v) for v in image.std]
    meta.processUnits = [norm]
    stats = fb.StatsT()
    if tensor.dtype == "uint8":
        stats.min, stats.max = [0.0], [255.0]
        what = "0..255 pixels (the camera bitmap as it is)"
    elif tensor.dtype == "float32":
        stats.min = [float((0.0 - m) / s) for m, s in zip(image.mean, image.std)]
        stats.max = [float((255.0 - m) / s) for m, s in zip(image.mean, image.std)]
        what = "(pixel - mean) / std on 0..255 pixels, per the normalization"
    else:
        what = "normalized pixels quantized with the tensor's scale/zero point"
    meta.stats = stats
    order = "BGR" if image.color == "bgr" else image.color.upper()
    meta.description = (f"Image {image.height}x{image.width} {order}, {tensor.dtype}: {what}. "
                        f"Preprocessing spec {image.spec_name!r}: resize/crop to {image.height}x{image.width} as the spec says."
                        f"{quant}")
    return meta


def _output_metadata(fb, tensor: TensorInfoForMetadata, labels: Optional[List[str]]):
    meta = fb.TensorMetadataT()
    meta.name = tensor.name
    quant = (f" Quantized: real = {tensor.scale:.9g} * (q - {tensor.zero_point})." if tensor.scale else "")
    content = fb.ContentT()
    content.contentPropertiesType = fb.ContentProperties.FeatureProperties
    content.contentProperties = fb.FeaturePropertiesT()
    meta.content = content
    if labels:
        meta.description = f"Scores of the {len(labels)} classes ({tensor.dtype}), class i named on line i of {LABEL_FILE}.{quant}"
        label_file = fb.AssociatedFileT()
        label_file.name = LABEL_FILE
        label_file.description = "Class names, one per line (line i = output index i)."
        label_file.type = fb.AssociatedFileType.TENSOR_AXIS_LABELS
        meta.associatedFiles = [label_file]
    else:
        meta.description = f"Output tensor ({tensor.dtype}).{quant}"
    return meta


def build_metadata(content: MetadataContent) -> bytes:
    """The ModelMetadata flatbuffer (with its M001 identifier)."""
    import flatbuffers

    fb = schema()
    model = fb.ModelMetadataT()
    info = content.info
    model.name = info.name or "edgekit model"
    model.description = info.description or "Quantized by edgekit (int8 inside)."
    model.version = info.version or "1"
    model.author = info.author or "unknown (not given: pass --author)"
    model.license = info.license or "unknown (not given: pass --license)"
    model.minParserVersion = MIN_PARSER_VERSION
    provenance = fb.AssociatedFileT()
    provenance.name = PROVENANCE_FILE
    provenance.description = "edgekit provenance: source and float model sha256, calibration, options, tool versions."
    provenance.type = fb.AssociatedFileType.DESCRIPTIONS
    model.associatedFiles = [provenance]
    sub = fb.SubGraphMetadataT()
    sub.inputTensorMetadata = [_input_metadata(fb, t, content.image if i == 0 else None) for i, t in enumerate(content.inputs)]
    sub.outputTensorMetadata = [_output_metadata(fb, t, content.labels if i == content.label_output else None)
                                for i, t in enumerate(content.outputs)]
    model.subgraphMetadata = [sub]
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), METADATA_IDENTIFIER)
    return bytes(builder.Output())


def _flatbuffer_utils():
    from tensorflow.lite.python import schema_py_generated as tfl
    from tensorflow.lite.tools import flatbuffer_utils

    return tfl, flatbuffer_utils


def model_part(data: bytes) -> bytes:
    """The flatbuffer without an appended archive (what the interpreter reads)."""
    zipped = _zip_start(data)
    return data[:zipped] if zipped is not None else data


def _zip_start(data: bytes) -> Optional[int]:
    """Offset of a zip archive appended to the flatbuffer, or None (a plain model, or bytes that only look like one)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
            # zipfile shifts every header_offset by the bytes before the archive, so these are file offsets
            start = min(i.header_offset for i in infos) if infos else None
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, IndexError):
        return None
    if start is None or start <= 8 or data[start:start + 4] != b"PK\x03\x04":
        return None
    return start


def write_metadata(tflite: bytes, content: MetadataContent) -> bytes:
    """``tflite`` with TFLITE_METADATA set (replacing any) and labels + provenance appended as a zip."""
    if content.labels is not None and content.label_output is None:
        raise UserError("class labels given but no (1, N) output to attach them to")
    tfl, fbu = _flatbuffer_utils()
    model = fbu.convert_bytearray_to_object(bytearray(model_part(tflite)))
    meta = build_metadata(content)
    buffer = tfl.BufferT()
    buffer.data = np.frombuffer(meta, dtype=np.uint8)
    entries = [m for m in (model.metadata or []) if _text(m.name) != METADATA_NAME]
    model.buffers.append(buffer)
    entry = tfl.MetadataT()
    entry.name = METADATA_NAME
    entry.buffer = len(model.buffers) - 1
    model.metadata = entries + [entry]
    out = io.BytesIO()
    out.write(bytes(fbu.convert_object_to_bytearray(model)))
    with zipfile.ZipFile(out, "a", compression=zipfile.ZIP_STORED) as zf:
        files = {PROVENANCE_FILE: json.dumps(content.provenance, indent=2, sort_keys=True) + "\n"}
        if content.labels is not None:
            files[LABEL_FILE] = "".join(f"{label}\n" for label in content.labels)
        for name in sorted(files):
            zf.writestr(zipfile.ZipInfo(name, date_time=_ZIP_TIME), files[name].encode())
    return out.getvalue()


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# --- reading back -------------------------------------------------------------------------------------
class PackedMetadata(TypedDict):
    """A model's TFLITE_METADATA read back (``read_metadata``)."""

    metadata: JsonObject    # the ModelMetadata flatbuffer as plain data: the schema's own nested tables
    files: Dict[str, str]   # name -> text of the files packed after the model


def read_metadata(tflite: bytes) -> Optional[PackedMetadata]:
    """The model's TFLITE_METADATA as plain JSON-able data, plus the packed files; None when it has none."""
    tfl, fbu = _flatbuffer_utils()
    model = tfl.Model.GetRootAs(model_part(tflite), 0)
    index = None
    for i in range(model.MetadataLength()):
        if _text(model.Metadata(i).Name()) == METADATA_NAME:
            index = model.Metadata(i).Buffer()
    if index is None:
        return None
    raw = model.Buffers(index).DataAsNumpy()
    data = bytes(raw.tobytes()) if hasattr(raw, "tobytes") else b""
    if data[4:8] != METADATA_IDENTIFIER:
        raise UserError(f"the model's {METADATA_NAME} buffer is not a metadata flatbuffer (identifier {data[4:8]!r})")
    fb = schema()
    meta = fb.ModelMetadataT.InitFromObj(fb.ModelMetadata.GetRootAs(data, 0))
    return {"metadata": _plain(meta), "files": packed_files(tflite)}


def packed_files(tflite: bytes) -> Dict[str, str]:
    """{name: text} of the files appended to the model (empty when there are none)."""
    if _zip_start(tflite) is None:
        return {}
    with zipfile.ZipFile(io.BytesIO(tflite)) as zf:
        return {i.filename: zf.read(i.filename).decode("utf-8", "replace") for i in zf.infolist()}


def _plain(value):
    """Generated *T objects -> dicts with snake-ish keys; bytes -> str; numpy -> lists."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "__dict__") and type(value).__name__.endswith("T"):
        return {k: _plain(v) for k, v in vars(value).items() if v is not None}
    return value
