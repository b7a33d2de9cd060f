"""Keep in flash only the bytes of the .tflite that a prepared model reads: constant tensor data, per-channel scales
and zero points (everything else of the flatbuffer: tensor names, the schema's tables, metadata, and constants whose
tensors no record references, is never read on the prepared path).

The prepared blob (firmware/runtime/src/ek_prepared.c) refers to the model by byte offsets in its tensor records and
binds to it by length and FNV-1a checksum. ``compact_constants`` copies the referenced ranges into a smaller buffer
(each keeps its offset modulo 16, so every alignment the runtime checks still holds), rewrites the records' offsets,
the model length and checksum in the header and the blob's own checksum. The device code is unchanged: it validates
the compact buffer exactly as it validated the model.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import List, Optional, Tuple

from edgekit.errors import InternalError

EKP_MAGIC = 0x4D504B45
HEADER_WORDS = 21
H_TOTAL, H_CHECKSUM, H_MODEL_LEN, H_MODEL_SUM, H_TENSORS, H_TENSORS_OFF, H_TENSOR_REC = 2, 3, 4, 5, 7, 11, 18
TENSOR_RECORD = struct.Struct("<ii6iifiiiibbbBi")  # ekp_tensor (ek_internal.h), 64 bytes
WHERE_MODEL = 2
EKP_UNREAD = 2  # ekp_tensor.flags: a constant every reader skips (ek_internal.h); its bytes are not referenced
MERGE_GAP = 16  # ranges closer than this are kept as one (the padding costs less than a split)


@dataclass(frozen=True)
class CompactConstants:
    data: bytes            # the constants the prepared path reads (what the device binds as its "model")
    blob: bytes            # the prepared blob rewritten to point into ``data``
    model_bytes: int       # the .tflite it came from
    tensor_bytes: int      # constant tensor data kept
    quantization_bytes: int  # per-channel scales and zero points kept


def fnv1a(data: bytes, h: int = 2166136261) -> int:
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def _blob_checksum(blob: bytes) -> int:
    return fnv1a(blob[4 * (H_CHECKSUM + 1):], fnv1a(b"\0\0\0\0", fnv1a(blob[:4 * H_CHECKSUM])))


# ops whose prepared data points into the model by offset outside the tensor records (CALL_ONCE copies the variables'
# initial values from the init subgraph's constants): with them the whole model stays in flash
READS_MODEL_DIRECTLY = ("CALL_ONCE",)


def keeps_whole_model(op_names) -> Optional[str]:
    """Why the whole .tflite must stay in flash for a model with these ops, or None when it can be compacted."""
    direct = sorted(set(op_names) & set(READS_MODEL_DIRECTLY))
    if direct:
        return (f"{', '.join(direct)} reads the model by offset outside the tensor records (the variables' initial "
                "values in the init subgraph), so the .tflite is kept whole")
    return None


def whole_model(model: bytes, blob: bytes) -> CompactConstants:
    """The whole .tflite as the flash copy (keeps_whole_model): the blob is unchanged."""
    return CompactConstants(model, blob, len(model), len(model), 0)


def constants_for(model: bytes, blob: bytes, op_names) -> CompactConstants:
    """compact_constants, or the whole model when an op reads it outside the tensor records."""
    return whole_model(model, blob) if keeps_whole_model(op_names) else compact_constants(model, blob)


def unread_constants(blob: bytes) -> Tuple[int, int]:
    """(tensors, data bytes) of the constants the prepared blob marks EKP_UNREAD: every op reading them uses its own
    re-laid-out or folded copy, so neither the blob nor the compacted constants keep them."""
    header = struct.unpack_from(f"<{HEADER_WORDS}I", blob)
    count, t_off = header[H_TENSORS], header[H_TENSORS_OFF]
    records = [TENSOR_RECORD.unpack_from(blob, t_off + TENSOR_RECORD.size * t) for t in range(count)]
    dropped = [r for r in records if r[-1] & EKP_UNREAD]
    return len(dropped), sum(r[8] for r in dropped)


def compact_constants(model: bytes, blob: bytes) -> CompactConstants:
    """The referenced bytes of ``model`` and ``blob`` rewritten to use them (see the module docstring)."""
    header = list(struct.unpack_from(f"<{HEADER_WORDS}I", blob))
    if header[0] != EKP_MAGIC or header[H_TENSOR_REC] != TENSOR_RECORD.size or header[H_MODEL_LEN] != len(model):
        raise InternalError("compact_constants: not a prepared blob of this model and record layout")
    count, t_off = header[H_TENSORS], header[H_TENSORS_OFF]
    records = [list(TENSOR_RECORD.unpack_from(blob, t_off + TENSOR_RECORD.size * t)) for t in range(count)]
    ranges: List[Tuple[int, int]] = []
    tensor_bytes = quant_bytes = 0
    for r in records:
        if r[0] == WHERE_MODEL and r[8] > 0:
            ranges.append((r[1], r[1] + r[8]))
            tensor_bytes += r[8]
        if r[11] >= 0 and r[13] > 0:
            ranges.append((r[11], r[11] + 4 * r[13]))
            quant_bytes += 4 * r[13]
        if r[12] >= 0 and r[13] > 0:
            ranges.append((r[12], r[12] + 8 * r[13]))
            quant_bytes += 8 * r[13]
    segments: List[List[int]] = []
    for start, end in sorted(ranges):
        if segments and start <= segments[-1][1] + MERGE_GAP:
            segments[-1][1] = max(segments[-1][1], end)
        else:
            segments.append([start, end])
    out = bytearray()
    moved: List[Tuple[int, int, int]] = []  # (old start, old end, new start)
    for start, end in segments:
        pos = (len(out) + 15) // 16 * 16 + start % 16
        out.extend(b"\0" * (pos - len(out)))
        out.extend(model[start:end])
        moved.append((start, end, pos))
    out.extend(b"\0" * ((-len(out)) % 16))

    def new_offset(old: int, length: int) -> int:
        for start, end, pos in moved:
            if start <= old and old + length <= end:
                return pos + (old - start)
        raise InternalError(f"compact_constants: range {old}+{length} was not kept")

    rewritten = bytearray(blob)
    for t, r in enumerate(records):
        if r[0] == WHERE_MODEL:
            r[1] = new_offset(r[1], r[8]) if r[8] > 0 else 0
        if r[11] >= 0:
            r[11] = new_offset(r[11], 4 * r[13]) if r[13] > 0 else 0
        if r[12] >= 0:
            r[12] = new_offset(r[12], 8 * r[13]) if r[13] > 0 else 0
        TENSOR_RECORD.pack_into(rewritten, t_off + TENSOR_RECORD.size * t, *r)
    data = bytes(out)
    struct.pack_into("<I", rewritten, 4 * H_MODEL_LEN, len(data))
    struct.pack_into("<I", rewritten, 4 * H_MODEL_SUM, fnv1a(data))
    struct.pack_into("<I", rewritten, 4 * H_CHECKSUM, 0)
    struct.pack_into("<I", rewritten, 4 * H_CHECKSUM, _blob_checksum(bytes(rewritten)))
    return CompactConstants(data, bytes(rewritten), len(model), tensor_bytes, quant_bytes)
