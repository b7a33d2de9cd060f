"""Read an .mlpackage on any OS: the Model spec protobuf, the weight blobs and MIL values as numpy arrays.

No Core ML runtime is involved; only coremltools' generated protobuf classes are used. Weight blobs are parsed
here (MIL blob storage v2: a 64-byte file header, then per blob a 64-byte metadata record starting with the
sentinel 0xDEADBEEF and giving the data size and absolute offset), so a truncated or corrupt package gives an
InvalidModelError naming what is wrong instead of a crash inside a native reader.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Dict, Tuple

import numpy as np

from edgekit.errors import InvalidModelError, ToolMissingError

BLOB_SENTINEL = 0xDEADBEEF
_HEADER_SIZE = 64
_METADATA = struct.Struct("<IIQQQ")  # sentinel, blob dtype, size in bytes, data offset, padding size in bits

# MIL DataType enum value -> (numpy dtype, MIL name); sub-byte types are unpacked to the listed numpy dtype.
DATA_TYPES: Dict[int, Tuple[Any, str]] = {
    1: (np.bool_, "bool"),
    2: (np.str_, "string"),
    10: (np.float16, "fp16"),
    11: (np.float32, "fp32"),
    12: (np.float64, "fp64"),
    21: (np.int8, "int8"),
    22: (np.int16, "int16"),
    23: (np.int32, "int32"),
    24: (np.int64, "int64"),
    25: (np.int8, "int4"),
    31: (np.uint8, "uint8"),
    32: (np.uint16, "uint16"),
    33: (np.uint32, "uint32"),
    34: (np.uint64, "uint64"),
    35: (np.uint8, "uint4"),
    36: (np.uint8, "uint2"),
    37: (np.uint8, "uint1"),
    38: (np.uint8, "uint6"),
    39: (np.uint8, "uint3"),
}
SUB_BYTE_BITS = {25: 4, 35: 4, 36: 2, 37: 1, 38: 6, 39: 3}
SIGNED_SUB_BYTE = {25}


def load_protos():
    """coremltools' generated Model_pb2 and MIL_pb2 modules (ToolMissingError without coremltools)."""
    try:
        from coremltools.proto import MIL_pb2, Model_pb2
    except ImportError:
        raise ToolMissingError("coremltools", "pip install coremltools==9.0 (or run `make install`)") from None
    return Model_pb2, MIL_pb2


def read_package(path: Path):
    """(Model spec, weights folder) of an .mlpackage; InvalidModelError for anything unreadable."""
    path = Path(path)
    fix = "re-create the package (ct.convert(...).save('model.mlpackage')) or copy it again completely"
    if not path.is_dir():
        raise InvalidModelError(f"{path} is not an .mlpackage folder", fix=fix)
    manifest_path = path / "Manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
        root = manifest["itemInfoEntries"][manifest["rootModelIdentifier"]]
        spec_path = path / "Data" / root["path"]
    except FileNotFoundError:
        raise InvalidModelError(f"{path} has no Manifest.json; it is not a complete .mlpackage", fix=fix) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidModelError(f"{manifest_path} is corrupt ({type(exc).__name__}: {exc})", fix=fix) from exc
    Model_pb2, _ = load_protos()
    try:
        data = spec_path.read_bytes()
    except OSError as exc:
        raise InvalidModelError(f"{path}: cannot read the model spec {spec_path.name}: {exc.strerror}", fix=fix) from exc
    spec = Model_pb2.Model()
    try:
        spec.ParseFromString(data)
    except Exception as exc:  # protobuf raises DecodeError, or RuntimeWarning-ish errors on garbage
        raise InvalidModelError(f"{spec_path} is truncated or corrupt (protobuf: {exc})", fix=fix) from exc
    if spec.WhichOneof("Type") != "mlProgram":
        kind = spec.WhichOneof("Type") or "empty"
        raise InvalidModelError(
            f"{path} holds a Core ML '{kind}' model, not an ML Program; the evaluator reads ML Programs only",
            fix="convert with ct.convert(..., convert_to='mlprogram')",
        )
    weights_dir = spec_path.parent / "weights"
    return spec, weights_dir


class BlobStore:
    """Weight blobs of one package, read lazily and checked against the file size."""

    def __init__(self, weights_dir: Path) -> None:
        self.weights_dir = Path(weights_dir)
        self._files: Dict[str, bytes] = {}

    def _file(self, file_name: str) -> bytes:
        name = file_name.split("/")[-1]
        if name not in self._files:
            target = self.weights_dir / name
            try:
                self._files[name] = target.read_bytes()
            except OSError as exc:
                raise InvalidModelError(
                    f"weight file {target} is missing or unreadable ({exc.strerror})",
                    fix="copy the whole .mlpackage folder, including Data/com.apple.CoreML/weights",
                ) from exc
            if len(self._files[name]) < _HEADER_SIZE:
                raise InvalidModelError(f"weight file {target} is truncated ({len(self._files[name])} bytes)")
        return self._files[name]

    def read(self, file_name: str, offset: int, data_type: int, shape: Tuple[int, ...]) -> np.ndarray:
        blob = self._file(file_name)
        where = f"{file_name} @ {offset}"
        if offset + _METADATA.size > len(blob):
            raise InvalidModelError(f"weight blob {where} lies beyond the end of the file ({len(blob)} bytes): truncated")
        sentinel, _, size, data_offset, _ = _METADATA.unpack_from(blob, offset)
        if sentinel != BLOB_SENTINEL:
            raise InvalidModelError(f"weight blob {where} has no valid header (sentinel {sentinel:#x}): corrupt weights")
        if data_offset + size > len(blob):
            raise InvalidModelError(f"weight blob {where} needs {data_offset + size} bytes, file has {len(blob)}: truncated")
        raw = blob[data_offset:data_offset + size]
        count = int(np.prod(shape)) if shape else 1
        return decode_bytes(raw, data_type, shape, count, where)


def decode_bytes(raw: bytes, data_type: int, shape: Tuple[int, ...], count: int, where: str) -> np.ndarray:
    """Bytes of a MIL tensor (packed little-endian for sub-byte types) -> numpy array of ``shape``."""
    if data_type not in DATA_TYPES:
        raise InvalidModelError(f"value {where} has unknown MIL data type {data_type}")
    np_type, name = DATA_TYPES[data_type]
    if data_type in SUB_BYTE_BITS:
        nbits = SUB_BYTE_BITS[data_type]
        bits = np.unpackbits(np.frombuffer(raw, np.uint8), bitorder="little")
        if bits.size < count * nbits:
            raise InvalidModelError(f"value {where} ({name}) holds {bits.size // nbits} elements, needs {count}")
        bits = bits[: count * nbits].reshape(count, nbits).astype(np.int32)
        values = (bits << np.arange(nbits, dtype=np.int32)).sum(axis=1)
        if data_type in SIGNED_SUB_BYTE:
            values = np.where(values >= 1 << (nbits - 1), values - (1 << nbits), values)
        return values.astype(np_type).reshape(shape)
    itemsize = np.dtype(np_type).itemsize
    if len(raw) < count * itemsize:
        raise InvalidModelError(f"value {where} ({name}) holds {len(raw)} bytes, needs {count * itemsize}: truncated")
    return np.frombuffer(raw[: count * itemsize], np_type).reshape(shape).copy()
