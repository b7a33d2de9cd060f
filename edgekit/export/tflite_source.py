"""A .tflite given as the model: it must be float (it is the reference for calibration).

A "hybrid" model (float inputs/outputs, but int8 constant weights consumed directly by float ops, as the
dynamic-range quantizer writes them) is accepted: its weights are dequantized to float32 first, so the
float reference and the int8 result get proper per-channel weights (without this, mlir_quantize keeps the
hybrid per-tensor weight scales).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import List

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

from edgekit.errors import InvalidModelError
from edgekit.tflite_model import TFLiteModel

log = logging.getLogger(__name__)

_INT_WEIGHTS = {schema.TensorType.INT8: np.int8, schema.TensorType.UINT8: np.uint8, schema.TensorType.INT16: np.int16}


def float_tflite_from_tflite(path: Path) -> bytes:
    model = TFLiteModel.load(path)
    quantized = [t.name for t in model.inputs + model.outputs if t.is_quantized or t.dtype != np.float32]
    if quantized:
        raise InvalidModelError(
            f"{path} is already quantized (non-float inputs/outputs: {quantized})",
            fix="pass the float model; use `edgekit parity` to check an existing int8 model",
        )
    return dequantize_hybrid_weights(model.data, str(path))


def dequantize_hybrid_weights(data: bytes, label: str = "model") -> bytes:
    """Float model bytes with every quantized constant weight of a float op turned into float32."""
    obj = schema.ModelT.InitFromPackedBuf(data, 0)
    changed: List[str] = []
    for sub in obj.subgraphs or []:
        for op in sub.operators or []:
            inputs = [i for i in (op.inputs if op.inputs is not None else []) if i >= 0]
            if not inputs or sub.tensors[inputs[0]].type != schema.TensorType.FLOAT32:
                continue
            for index in inputs[1:]:
                tensor = sub.tensors[index]
                buffer = obj.buffers[tensor.buffer] if tensor.buffer < len(obj.buffers) else None
                if tensor.type not in _INT_WEIGHTS or buffer is None or buffer.data is None or tensor.quantization is None:
                    continue
                if tensor.quantization.scale is None or len(tensor.quantization.scale) == 0:
                    continue
                buffer.data = _dequantized(tensor, bytes(bytearray(buffer.data))).tobytes()
                tensor.type = schema.TensorType.FLOAT32
                tensor.quantization = None
                changed.append(tensor.name.decode() if isinstance(tensor.name, bytes) else str(tensor.name))
    if not changed:
        return data
    log.warning("%s is a hybrid model: dequantized %d int8 weight tensor(s) to float32 (%s); the float reference "
                "is only as accurate as those weights", label, len(changed), ", ".join(changed[:5]))
    return pack_model(obj)


def _dequantized(tensor, raw: bytes) -> np.ndarray:
    q = np.frombuffer(raw, dtype=_INT_WEIGHTS[tensor.type]).reshape(tensor.shape).astype(np.float64)
    scale = np.asarray(tensor.quantization.scale, dtype=np.float64)
    zero = np.asarray(tensor.quantization.zeroPoint if tensor.quantization.zeroPoint is not None else [0], dtype=np.float64)
    if scale.size > 1:
        shape = [1] * q.ndim
        shape[tensor.quantization.quantizedDimension] = scale.size
        scale, zero = scale.reshape(shape), np.broadcast_to(zero, scale.shape).reshape(shape)
    return ((q - zero) * scale).astype(np.float32)


class _AlignedBuilder(flatbuffers.Builder):
    """A Builder writing byte vectors given as numpy arrays (buffer data) 16-byte aligned, in one copy."""

    def CreateNumpyVector(self, x):
        if x.dtype != np.uint8 or x.ndim != 1:
            return super().CreateNumpyVector(x)
        self.StartVector(1, x.size, 16)
        payload = x.tobytes()
        self.head = self.head - len(payload)
        self.Bytes[self.head:self.head + len(payload)] = payload
        self.vectorNumElems = x.size
        return self.EndVector()


def pack_model(obj) -> bytes:
    """Serialize a schema ModelT with 16-byte aligned buffers, as TFLite's converter writes them."""
    original = schema.BufferStartDataVector
    schema.BufferStartDataVector = lambda builder, n: builder.StartVector(1, n, 16)
    try:
        builder = _AlignedBuilder(1024)
        builder.Finish(obj.Pack(builder), file_identifier=b"TFL3")
    finally:
        schema.BufferStartDataVector = original
    return bytes(builder.Output())
