"""Full-int8 TFLite from a float .tflite and chosen activation ranges.

Route (TOOLCHAIN.md): write min/max into every activation tensor of the float flatbuffer (what
TFLiteConverter's calibrate-only step records), then run TF's MLIR quantizer with
fully_quantize=True and int8 input/output.
"""
from __future__ import annotations

import logging
import re
import dataclasses
from dataclasses import dataclass
from typing import Dict, List, Tuple

from edgekit.deps import tensorflow
from edgekit.errors import ConversionError
from edgekit.quiet import captured_output
from edgekit.support import OpSupport, SupportReport

log = logging.getLogger(__name__)

INT8_TYPES = {"INT8", "INT32"}  # activations/weights int8, biases int32
ALLOWED_INDEX_TYPES = {"INT32", "INT64", "BOOL"}  # shape/index tensors of RESHAPE etc.
_BIASED_OPS = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"}
DROPPED_METADATA = {"keep_stablehlo_constant"}


def _tf():
    tf = tensorflow()
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.python.convert import mlir_quantize
    from tensorflow.lite.tools import flatbuffer_utils

    return tf, schema, mlir_quantize, flatbuffer_utils


def builtin_name(schema, opcode) -> str:
    code = max(int(opcode.builtinCode), int(opcode.deprecatedBuiltinCode))
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    name = names.get(code, f"BUILTIN_{code}")
    if name == "CUSTOM" and opcode.customCode:
        custom = opcode.customCode.decode() if isinstance(opcode.customCode, bytes) else str(opcode.customCode)
        return f"CUSTOM({custom})"
    return name


def calibrated_flatbuffer(float_tflite: bytes, ranges: Dict[int, Tuple[float, float]]) -> bytes:
    """The float model with [min, max] recorded on each activation tensor (subgraph 0)."""
    _, schema, _, fb = _tf()
    model = fb.convert_bytearray_to_object(bytearray(float_tflite))
    # litert-torch marks its models "keep_stablehlo_constant"; the MLIR quantizer then keeps the
    # weights as float constants and leaves every conv/FC in float. The flag only matters for
    # StableHLO round trips, which a quantized TFLite model does not need.
    if model.metadata:
        model.metadata = [m for m in model.metadata if _decode(m.name) not in DROPPED_METADATA]
    tensors = model.subgraphs[0].tensors
    for index, (lo, hi) in ranges.items():
        q = tensors[index].quantization or schema.QuantizationParametersT()
        q.min, q.max = [float(lo)], [float(hi)]
        tensors[index].quantization = q
    return bytes(fb.convert_object_to_bytearray(model))


def quantize_calibrated(calibrated: bytes) -> bytes:
    """MLIR full-int8 quantization; quantizer errors become a ConversionError naming the ops."""
    tf, _, mlir_quantize, _ = _tf()
    try:
        with captured_output() as stderr:
            out = mlir_quantize(
                calibrated,
                disable_per_channel=False,
                fully_quantize=True,
                input_data_type=tf.int8,
                output_data_type=tf.int8,
            )
    except Exception as exc:  # the quantizer raises bare Exceptions with MLIR diagnostics
        text = "\n".join(stderr) + "\n" + str(exc)
        named = sorted(set(re.findall(r"(?:op|operation):? '?(?:tfl\.)?([A-Za-z_0-9]+)'?", text)))
        detail = next((l.strip() for l in text.splitlines() if "error" in l.lower()), str(exc).strip()[:300])
        raise ConversionError(
            f"the TFLite int8 quantizer failed{' on ' + ', '.join(named) if named else ''}: {detail}",
            fix="check the operator list with --verbose; unsupported layers must be replaced",
        ) from None
    return bytes(out)


@dataclass(frozen=True)
class QuantizedTensor:
    name: str
    dtype: str
    scales: Tuple[float, ...]
    zero_points: Tuple[int, ...]
    constant: bool
    is_bias: bool = False  # the bias input of a CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED


def inspect_int8(tflite: bytes) -> Tuple[SupportReport, List[QuantizedTensor], List[str]]:
    """Check a model is full-int8 (every op on int8 data, per-channel int8 weights, int32 bias).

    Returns the support report (ops left in float rejected), the tensor table and op names.
    """
    _, schema, _, fb = _tf()
    model = fb.convert_bytearray_to_object(bytearray(tflite))
    type_names = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    report = SupportReport("tflite-int8")
    tensors: List[QuantizedTensor] = []
    sub = model.subgraphs[0]
    for t in sub.tensors:
        q = t.quantization
        buf = model.buffers[t.buffer] if t.buffer < len(model.buffers) else None
        constant = bool(buf is not None and buf.data is not None and len(buf.data))
        tensors.append(
            QuantizedTensor(
                name=_decode(t.name),
                dtype=type_names.get(t.type, str(t.type)),
                scales=tuple(float(v) for v in (q.scale if q is not None and q.scale is not None else [])),
                zero_points=tuple(int(v) for v in (q.zeroPoint if q is not None and q.zeroPoint is not None else [])),
                constant=constant,
            )
        )
    ops: List[str] = []
    for n, op in enumerate(sub.operators):
        name = builtin_name(schema, model.operatorCodes[op.opcodeIndex])
        ops.append(name)
        if name in _BIASED_OPS and op.inputs is not None and len(op.inputs) > 2 and op.inputs[2] >= 0:
            tensors[op.inputs[2]] = dataclasses.replace(tensors[op.inputs[2]], is_bias=True)
        first_out = tensors[op.outputs[0]].name if op.outputs is not None and len(op.outputs) else "?"
        location = f"op #{n} -> tensor '{first_out}'"
        float_io = [
            tensors[i].name
            for i in list(op.inputs if op.inputs is not None else []) + list(op.outputs if op.outputs is not None else [])
            if i >= 0 and tensors[i].dtype not in INT8_TYPES | ALLOWED_INDEX_TYPES
        ]
        if name.startswith("CUSTOM") or name.startswith("Flex"):
            report.ops.append(OpSupport(name, location, False, "not a TFLite builtin (TFLITE_BUILTINS_INT8 only)"))
        elif float_io:
            report.ops.append(OpSupport(name, location, False, f"left in float by the quantizer (float tensors: {float_io[:3]})"))
        else:
            report.ops.append(OpSupport(name, location, True))
    return report, tensors, ops


def _decode(name) -> str:
    return name.decode() if isinstance(name, bytes) else str(name)
