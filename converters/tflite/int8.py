"""Full-int8 (or 16x8) TFLite from a float .tflite and chosen activation ranges.

Route (TOOLCHAIN.md): write min/max into every activation tensor of the float flatbuffer (what
TFLiteConverter's calibrate-only step records), then run TF's MLIR quantizer with
fully_quantize=True and int8 input/output.

Mixed precision: the MLIR quantizer's ``denylisted_nodes`` (op output tensor names; TF's
QuantizationDebugger uses the same) keeps those ops in float with DEQUANTIZE/QUANTIZE around them.
Its ``denylisted_ops`` takes builtin names (``CONV_2D``; MLIR names such as ``tfl.conv_2d`` are
silently ignored); the plan resolves op types to nodes, so only ``denylisted_nodes`` is used.

16x8 (int16 activations, int8 weights, int64 bias): the MLIR quantizer's QUANTIZED_INT16 mode
writes asymmetric int16 zero points that LiteRT's kernels reject (measured, TF 2.21), so this
uses TF's older quantizer (what TFLiteConverter itself uses for 16x8) on the same calibrated
flatbuffer without feeding data: it keeps the recorded min/max. It has no denylist: 16x8 is
whole-model only.
"""
from __future__ import annotations

import logging
import dataclasses
from dataclasses import dataclass
from typing import Collection, Dict, List, Sequence, Tuple

from edgekit.deps import tensorflow
from edgekit.errors import ConversionError
from edgekit.native import NativeCrashError, run_isolated
from edgekit.quiet import captured_output
from edgekit.support import OpSupport, SupportReport
from edgekit.tflite_graph import Graph, Op, read_graph

from .diagnostics import explain

log = logging.getLogger(__name__)

INT8_TYPES = {"INT8", "INT32"}  # activations/weights int8, biases int32
INT16X8_TYPES = {"INT16", "INT8", "INT32", "INT64"}  # int16 activations, int8 weights, int64 biases
CONVERSION_OPS = {"QUANTIZE", "DEQUANTIZE"}
ALLOWED_INDEX_TYPES = {"INT32", "INT64", "BOOL"}  # shape/index tensors of RESHAPE etc.
_BIASED_OPS = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"}
DROPPED_METADATA = {"keep_stablehlo_constant"}


def _tf():
    tf = tensorflow()
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.python.convert import mlir_quantize
    from tensorflow.lite.tools import flatbuffer_utils

    return tf, schema, mlir_quantize, flatbuffer_utils


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


def quantize_calibrated(calibrated: bytes, *, activations: str = "int8", float_nodes: Sequence[str] = (),
                        io: str = "int8") -> bytes:
    """Full-integer quantization of a calibrated flatbuffer.

    activations: "int8" (MLIR quantizer) or "int16" (16x8, whole model). ``float_nodes``: op output
    tensor names kept in float (int8 only). ``io``: the model's input/output type, int8 | uint8 | float32
    (QUANTIZE/DEQUANTIZE added at the boundary; the inside stays int8). Quantizer errors become
    a ConversionError naming the ops.
    """
    tf, _, mlir_quantize, _ = _tf()
    if activations == "int16" and float_nodes:
        raise ValueError("16x8 quantization is whole-model only (no per-op float fallback)")
    if activations == "int16" and io != "int8":
        raise ValueError("16x8 models keep int16 input/output")

    def run() -> bytes:
        if activations == "int16":
            return bytes(_quantize_16x8(calibrated))
        return bytes(mlir_quantize(calibrated, disable_per_channel=False, fully_quantize=True, input_data_type=tf.int8,
                                   output_data_type=tf.int8, denylisted_nodes=list(float_nodes) or None))

    kind = "16x8" if activations == "int16" else "int8"
    try:
        with captured_output() as stderr:
            out = run_isolated(f"TensorFlow's {kind} quantizer (mlir_quantize)", run)
    except NativeCrashError:
        raise
    except Exception as exc:  # the quantizer raises bare Exceptions with MLIR diagnostics
        text = "\n".join(stderr) + "\n" + (getattr(exc, "stderr", "") or "") + "\n" + str(exc)
        try:
            graph = read_graph(calibrated, source="the float model")
        except Exception:  # the message must not depend on the model being readable
            graph = None
        message, fix = explain(text, graph, kind=kind)
        log.debug("the %s quantizer's diagnostics:\n%s", kind, text)
        raise ConversionError(message, fix=fix) from exc
    if io != "int8":  # TF's quantizer writes int8 I/O here; the app's types are added around it
        from edgekit.mobile.io_types import convert_io

        return convert_io(bytes(out), io)
    return bytes(out)


def _quantize_16x8(calibrated: bytes) -> bytes:
    """TF's older quantizer in 16x8 mode with int16 input/output, using the ranges in the flatbuffer."""
    import numpy as np
    from tensorflow.lite.python.optimize import _pywrap_tensorflow_lite_calibration_wrapper as wrapper

    calibrator = wrapper.CalibrationWrapper(calibrated, [], [])
    int16, int64 = np.dtype(np.int16).num, np.dtype(np.int64).num
    # (input type, output type, allow_float, activations type, bias type, disable per-channel, ... for dense)
    return bytes(calibrator.QuantizeModel(int16, int16, False, int16, int64, False, False))


@dataclass(frozen=True)
class QuantizedTensor:
    name: str
    dtype: str
    scales: Tuple[float, ...]
    zero_points: Tuple[int, ...]
    constant: bool
    is_bias: bool = False  # the bias input of a CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED


def inspect_int8(
    tflite: bytes, *, activations: str = "int8", kept_float: Collection[str] = (), io: str = "int8",
) -> Tuple[SupportReport, List[QuantizedTensor], List[str]]:
    """Check a model is full-integer (every op on int8 data — int16 with activations="int16" —,
    per-channel int8 weights, int32/int64 bias), except the ops the plan keeps in float.

    ``kept_float``: float-model output tensor names of ops kept in float on purpose; those ops and
    the DEQUANTIZE/QUANTIZE the quantizer put around them are accepted, any other op left in float
    is rejected. ``io`` uint8 / float32: the QUANTIZE / DEQUANTIZE ops converting the model's own inputs and
    outputs are accepted. Returns the support report, the tensor table and op names.
    """
    graph = read_graph(tflite, source="the quantized model")
    integer_types = INT16X8_TYPES if activations == "int16" else INT8_TYPES
    report = SupportReport("tflite-int16x8" if activations == "int16" else "tflite-int8")
    tensors: List[QuantizedTensor] = [
        QuantizedTensor(name=t.name, dtype=t.type, scales=t.scales, zero_points=t.zero_points, constant=t.constant)
        for t in graph.tensors
    ]
    names = [op.qualified_name for op in graph.ops]
    kept = _kept_float_ops(graph.ops, names, tensors, kept_float)
    if io != "int8":
        kept.update(_io_conversion_ops(graph, names, io))
    ops: List[str] = []
    for n, op in enumerate(graph.ops):
        name = names[n]
        ops.append(name)
        if name in _BIASED_OPS and len(op.inputs) > 2 and op.inputs[2] >= 0:
            tensors[op.inputs[2]] = dataclasses.replace(tensors[op.inputs[2]], is_bias=True)
        first_out = tensors[op.outputs[0]].name if op.outputs else "?"
        location = f"op #{n} -> tensor '{first_out}'"
        float_io = [
            tensors[i].name
            for i in _io(op)
            if i >= 0 and tensors[i].dtype not in integer_types | ALLOWED_INDEX_TYPES
        ]
        if name.startswith("CUSTOM") or name.startswith("Flex"):
            report.ops.append(OpSupport(name, location, False, "not a TFLite builtin (TFLITE_BUILTINS_INT8 only)"))
        elif float_io and n in kept:
            report.ops.append(OpSupport(name, location, True, kept[n]))
        elif float_io:
            report.ops.append(OpSupport(name, location, False, f"left in float by the quantizer (float tensors: {float_io[:3]})"))
        else:
            report.ops.append(OpSupport(name, location, True))
    return report, tensors, ops


def _io_conversion_ops(graph: Graph, names: List[str], io: str) -> Dict[int, str]:
    """{op index: reason} for the QUANTIZE ops reading a graph input and the DEQUANTIZE/QUANTIZE ops writing a
    graph output (what --io uint8|float32 adds around the int8 model)."""
    graph_in, graph_out = set(graph.inputs), set(graph.outputs)
    found: Dict[int, str] = {}
    for n, op in enumerate(graph.ops):
        ins, outs = set(op.inputs), set(op.outputs)
        if names[n] == "QUANTIZE" and ins & graph_in:
            found[n] = f"converts the {io} model input to int8 (--io {io})"
        elif names[n] in CONVERSION_OPS and outs & graph_out:
            found[n] = f"converts int8 to the {io} model output (--io {io})"
    return found


def _io(op: Op) -> List[int]:
    return list(op.inputs) + list(op.outputs)


def _is_kept_name(name: str, kept: Collection[str]) -> bool:
    """The quantizer keeps a float op's tensor name, or appends digits when a QUANTIZE takes it."""
    if name in kept:
        return True
    return any(name.startswith(k) and name[len(k):].isdigit() for k in kept)


def _kept_float_ops(operators: Sequence[Op], names: List[str], tensors: List[QuantizedTensor],
                    kept_float: Collection[str]) -> Dict[int, str]:
    """{op index: reason} for ops kept in float on purpose and the conversions around them."""
    if not kept_float:
        return {}
    kept: Dict[int, str] = {}
    for n, op in enumerate(operators):
        if names[n] not in CONVERSION_OPS and op.outputs and _is_kept_name(tensors[op.outputs[0]].name, kept_float):
            kept[n] = "kept in float by the precision plan"
    kept_inputs = {i for n in kept for i in operators[n].inputs}
    kept_outputs = {o for n in kept for o in operators[n].outputs}
    for n, op in enumerate(operators):
        if names[n] == "DEQUANTIZE" and set(op.outputs) & kept_inputs:
            kept[n] = "converts int8 to float for an op kept in float"
        elif names[n] == "QUANTIZE" and set(op.inputs) & kept_outputs:
            kept[n] = "converts an op kept in float back to int8"
    return kept


def _decode(name) -> str:
    return name.decode() if isinstance(name, bytes) else str(name)
