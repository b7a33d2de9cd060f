"""Input/output types apps use (``--io int8|uint8|float32``); the inside of the model stays int8.

- int8: the quantizer's own I/O (what edgekit's firmware runtime and TFLite Micro take).
- float32: QUANTIZE at the input and DEQUANTIZE at the output; the app feeds (pixel - mean) / std.
- uint8 with an image preprocessing spec: the input takes the camera's 0..255 pixels as they are. Its
  quantization is set to the spec's value stage (real = scale_px * (pixel - zero_point_px) with
  scale_px = spec.scale / std and zero_point_px = mean / spec.scale), and the QUANTIZE op after it requantizes to
  the calibrated int8 grid. That needs one std and one integer mean/scale for all channels; otherwise use float32.
- uint8 without an image spec: the quantizer's uint8 (the int8 grid shifted by 128).
"""
from __future__ import annotations

import logging
from typing import Optional, Tuple

import numpy as np

from edgekit.errors import UserError

log = logging.getLogger(__name__)

IO_TYPES = ("int8", "uint8", "float32")


def pixel_quantization(spec) -> Tuple[float, int]:
    """(scale, zero_point) under which a uint8 input holds raw pixels for this spec; UserError if none exists."""
    from edgekit.preprocessing.values import channel_constants

    mean, std = channel_constants(spec)
    mean, std = mean.astype(np.float64), std.astype(np.float64)
    px_scale = float(np.float32(spec.scale))
    problems = []
    if not np.allclose(std, std[0], rtol=1e-6):
        problems.append(f"its std differs per channel ({[float(v) for v in std]})")
    zero_points = mean / px_scale
    if not np.allclose(zero_points, zero_points[0], atol=1e-3):
        problems.append(f"its mean differs per channel ({[float(v) for v in mean]})")
    zp = float(zero_points[0])
    if abs(zp - round(zp)) > 1e-3 or not 0 <= round(zp) <= 255:
        problems.append(f"mean / scale = {zp:.4g} is not an integer pixel value in 0..255")
    if problems:
        raise UserError(f"--io uint8 feeds raw 0..255 pixels, which one uint8 scale/zero point cannot normalize for "
                        f"preprocessing spec {spec.name!r}: " + "; ".join(problems),
                        fix="use --io float32 (the app normalizes with the mean/std in the model's metadata), or --io int8")
    return px_scale / float(std[0]), int(round(zp))


def convert_io(tflite: bytes, io: str) -> bytes:
    """An int8-I/O model -> the same model with ``io`` (uint8 | float32) inputs and outputs.

    What TFLiteConverter does for inference_input_type/output_type: a QUANTIZE (float32 or uint8 -> int8) after
    each input and a DEQUANTIZE (int8 -> float32) or QUANTIZE (int8 -> uint8, zero point + 128) before each output.
    The boundary tensors keep the original names (internal ones get an ``_int8`` suffix) and the signature follows."""
    if io == "int8":
        return tflite
    from tensorflow.lite.python import schema_py_generated as tfl
    from tensorflow.lite.tools import flatbuffer_utils as fbu

    model = fbu.convert_bytearray_to_object(bytearray(tflite))
    new_type = tfl.TensorType.UINT8 if io == "uint8" else tfl.TensorType.FLOAT32

    def opcode(code: int) -> int:
        for i, c in enumerate(model.operatorCodes):
            if max(int(c.builtinCode), int(c.deprecatedBuiltinCode)) == code:
                c.version = max(int(c.version), 2)
                return i
        entry = tfl.OperatorCodeT()
        entry.builtinCode, entry.deprecatedBuiltinCode, entry.version = code, min(code, 127), 2
        model.operatorCodes.append(entry)
        return len(model.operatorCodes) - 1

    def operator(code: int, src: int, dst: int):
        op = tfl.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = opcode(code), [src], [dst]
        if code == tfl.BuiltinOperator.DEQUANTIZE:
            op.builtinOptionsType, op.builtinOptions = tfl.BuiltinOptions.DequantizeOptions, tfl.DequantizeOptionsT()
        else:
            op.builtinOptionsType, op.builtinOptions = tfl.BuiltinOptions.QuantizeOptions, tfl.QuantizeOptionsT()
        return op

    def boundary_tensor(sub, index: int) -> int:
        inner = sub.tensors[index]
        if inner.type != tfl.TensorType.INT8:
            raise UserError(f"--io {io}: model input/output {inner.name!r} is not int8")
        outer = tfl.TensorT()
        outer.shape, outer.shapeSignature, outer.type, outer.buffer = inner.shape, inner.shapeSignature, new_type, 0
        outer.name = inner.name
        inner.name = (inner.name.decode() if isinstance(inner.name, bytes) else str(inner.name)) + "_int8"
        if io == "uint8":
            q = tfl.QuantizationParametersT()
            q.scale, q.zeroPoint = [float(inner.quantization.scale[0])], [int(inner.quantization.zeroPoint[0]) + 128]
            outer.quantization = q
        sub.tensors.append(outer)
        return len(sub.tensors) - 1

    for sub_index, sub in enumerate(model.subgraphs[:1]):
        remap = {}
        front, back = [], []
        for old in list(sub.inputs):
            new = boundary_tensor(sub, int(old))
            front.append(operator(tfl.BuiltinOperator.QUANTIZE, new, int(old)))
            remap[int(old)] = new
        for old in list(sub.outputs):
            new = boundary_tensor(sub, int(old))
            code = tfl.BuiltinOperator.QUANTIZE if io == "uint8" else tfl.BuiltinOperator.DEQUANTIZE
            back.append(operator(code, int(old), new))
            remap[int(old)] = new
        sub.operators = front + list(sub.operators) + back
        sub.inputs = [remap[int(i)] for i in sub.inputs]
        sub.outputs = [remap[int(o)] for o in sub.outputs]
        for signature in model.signatureDefs or []:
            if signature.subgraphIndex != sub_index:
                continue
            for entry in list(signature.inputs or []) + list(signature.outputs or []):
                entry.tensorIndex = remap.get(int(entry.tensorIndex), entry.tensorIndex)
    return bytes(fbu.convert_object_to_bytearray(model))


def set_input_quantization(tflite: bytes, scale: float, zero_point: int) -> bytes:
    """Set the quantization of the model's (only) uint8 input, which must feed a QUANTIZE op only."""
    from tensorflow.lite.python import schema_py_generated as tfl
    from tensorflow.lite.tools import flatbuffer_utils as fbu

    model = fbu.convert_bytearray_to_object(bytearray(tflite))
    sub = model.subgraphs[0]
    if len(sub.inputs) != 1:
        raise UserError(f"--io uint8 with pixel input supports one image input, the model has {len(sub.inputs)}")
    index = int(sub.inputs[0])
    tensor = sub.tensors[index]
    if tensor.type != tfl.TensorType.UINT8:
        raise UserError("internal: the quantizer did not give a uint8 input")
    codes = model.operatorCodes
    consumers = [op for op in sub.operators if index in list(op.inputs)]
    names = [max(int(codes[op.opcodeIndex].builtinCode), int(codes[op.opcodeIndex].deprecatedBuiltinCode)) for op in consumers]
    if not consumers or any(code != tfl.BuiltinOperator.QUANTIZE for code in names):
        raise UserError("--io uint8 pixel input: the input does not feed a QUANTIZE op only; use --io float32")
    q = tensor.quantization or tfl.QuantizationParametersT()
    q.scale, q.zeroPoint = [float(np.float32(scale))], [int(zero_point)]
    q.min = q.max = None
    tensor.quantization = q
    log.debug("uint8 pixel input: scale %.9g zero point %d", scale, zero_point)
    return bytes(fbu.convert_object_to_bytearray(model))


def image_spec_for_input(spec, source_kind: Optional[str], shape) -> Optional[object]:
    """The spec when the data are images decoded by it into this input (NHWC or NCHW), else None."""
    if spec is None or source_kind != "image-folder" or len(shape) != 4:
        return None
    channels = shape[3] if spec.layout == "NHWC" else shape[1]
    return spec if channels == spec.channels else None


def image_hw(spec, shape) -> Tuple[int, int]:
    return (int(shape[1]), int(shape[2])) if spec.layout == "NHWC" else (int(shape[2]), int(shape[3]))
