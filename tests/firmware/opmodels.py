"""Build small int8 .tflite models directly from the schema, and the LiteRT BUILTIN_REF oracle.

Single-op models with arbitrary scales, zero points, shapes and options are the fastest way to test a kernel
against TFLite's reference kernels: no converter in between, every parameter under the test's control.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter, OpResolverType

Number = Union[float, int]

_DTYPES = {
    "float32": (schema.TensorType.FLOAT32, np.float32),
    "int32": (schema.TensorType.INT32, np.int32),
    "int8": (schema.TensorType.INT8, np.int8),
    "int16": (schema.TensorType.INT16, np.int16),
    "int64": (schema.TensorType.INT64, np.int64),
    "uint8": (schema.TensorType.UINT8, np.uint8),
    "bool": (schema.TensorType.BOOL, np.bool_),
}

# op name -> (BuiltinOptions union member, options class, defaults by schema field name)
_OPTIONS = {
    "CONV_2D": ("Conv2DOptions", {"stride_w": 1, "stride_h": 1, "dilation_w_factor": 1, "dilation_h_factor": 1}),
    "DEPTHWISE_CONV_2D": ("DepthwiseConv2DOptions", {"stride_w": 1, "stride_h": 1, "depth_multiplier": 1,
                                                     "dilation_w_factor": 1, "dilation_h_factor": 1}),
    "FULLY_CONNECTED": ("FullyConnectedOptions", {}),
    "AVERAGE_POOL_2D": ("Pool2DOptions", {"stride_w": 1, "stride_h": 1, "filter_width": 1, "filter_height": 1}),
    "MAX_POOL_2D": ("Pool2DOptions", {"stride_w": 1, "stride_h": 1, "filter_width": 1, "filter_height": 1}),
    "ADD": ("AddOptions", {}),
    "MUL": ("MulOptions", {}),
    "RESHAPE": ("ReshapeOptions", {}),
    "SOFTMAX": ("SoftmaxOptions", {"beta": 1.0}),
    "CONCATENATION": ("ConcatenationOptions", {}),
    "MEAN": ("ReducerOptions", {}),
    "SUM": ("ReducerOptions", {}),
    "PAD": ("PadOptions", {}),
    "TRANSPOSE": ("TransposeOptions", {}),
    "DEQUANTIZE": ("DequantizeOptions", {}),
    "HARD_SWISH": ("HardSwishOptions", {}),
    "LEAKY_RELU": ("LeakyReluOptions", {}),
    "GELU": ("GeluOptions", {}),
    "SUB": ("SubOptions", {}),
    "DIV": ("DivOptions", {}),
    "REDUCE_MAX": ("ReducerOptions", {}),
    "REDUCE_MIN": ("ReducerOptions", {}),
    "ARG_MAX": ("ArgMaxOptions", {}),
    "ARG_MIN": ("ArgMinOptions", {}),
    "L2_NORMALIZATION": ("L2NormOptions", {}),
    "BATCH_MATMUL": ("BatchMatMulOptions", {}),
    "SPLIT": ("SplitOptions", {}),
    "SPLIT_V": ("SplitVOptions", {}),
    "UNPACK": ("UnpackOptions", {}),
    "PACK": ("PackOptions", {}),
    "STRIDED_SLICE": ("StridedSliceOptions", {}),
    "SLICE": ("SliceOptions", {}),
    "SQUEEZE": ("SqueezeOptions", {}),
    "EXPAND_DIMS": ("ExpandDimsOptions", {}),
    "GATHER": ("GatherOptions", {}),
    "DEPTH_TO_SPACE": ("DepthToSpaceOptions", {}),
    "SPACE_TO_DEPTH": ("SpaceToDepthOptions", {}),
    "RESIZE_NEAREST_NEIGHBOR": ("ResizeNearestNeighborOptions", {}),
    "RESIZE_BILINEAR": ("ResizeBilinearOptions", {}),
    "CAST": ("CastOptions", {}),
    "FILL": ("FillOptions", {}),
    "SHAPE": ("ShapeOptions", {}),
    "ZEROS_LIKE": ("ZerosLikeOptions", {}),
    "TRANSPOSE_CONV": ("TransposeConvOptions", {"stride_w": 1, "stride_h": 1}),
    "MIRROR_PAD": ("MirrorPadOptions", {}),
    "SVDF": ("SVDFOptions", {"rank": 1, "fused_activation_function": 1}),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": ("UnidirectionalSequenceLSTMOptions", {"fused_activation_function": 4}),
}
_ENUMS = {"padding": schema.Padding, "fused_activation_function": schema.ActivationFunctionType,
          "weights_format": schema.FullyConnectedOptionsWeightsFormat}


@dataclass
class T:
    """A tensor: shape, dtype, quantization (lists = per-channel along quantized_dimension), constant data."""

    shape: Sequence[int]
    dtype: str = "int8"
    scale: Optional[Union[Number, Sequence[Number]]] = 0.05
    zero_point: Union[int, Sequence[int]] = 0
    data: Optional[np.ndarray] = None
    quantized_dimension: int = 0
    name: str = ""

    @property
    def np_dtype(self):
        return _DTYPES[self.dtype][1]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


def _options(op: str, options: Optional[Dict]) -> Tuple[int, object]:
    if op not in _OPTIONS:
        if options:
            raise ValueError(f"opmodels does not know the options of {op}")
        return schema.BuiltinOptions.NONE, None
    union_name, defaults = _OPTIONS[op]
    obj = getattr(schema, union_name + "T")()
    for key, value in {**defaults, **(options or {})}.items():
        attr = _camel(key)
        if not hasattr(obj, attr):
            raise ValueError(f"{union_name} has no field {key!r}")
        if key in _ENUMS and isinstance(value, str):
            value = getattr(_ENUMS[key], value)
        setattr(obj, attr, value)
    return getattr(schema.BuiltinOptions, union_name), obj


def _quantization(t: T):
    if t.scale is None:
        return None
    q = schema.QuantizationParametersT()
    scales = np.atleast_1d(np.asarray(t.scale, dtype=np.float32))
    zps = np.atleast_1d(np.asarray(t.zero_point, dtype=np.int64))
    if zps.size == 1 and scales.size > 1:
        zps = np.repeat(zps, scales.size)
    q.scale = [float(v) for v in scales]
    q.zeroPoint = [int(v) for v in zps]
    q.quantizedDimension = t.quantized_dimension
    return q


@contextmanager
def _aligned_buffers() -> Iterator[None]:
    """Pack buffer data 16-byte aligned, as TFLite's own converter does (schema force_align: 16)."""
    original = schema.BufferStartDataVector
    schema.BufferStartDataVector = lambda builder, n: builder.StartVector(1, n, 16)
    try:
        yield
    finally:
        schema.BufferStartDataVector = original


def build_graph(tensors: Sequence[T], ops: Sequence[Tuple[str, Sequence[int], Sequence[int], Optional[Dict]]],
                inputs: Sequence[int], outputs: Sequence[int]) -> bytes:
    """A one-subgraph model; ops are (name, input tensor indices (-1 = absent), output indices, options); a name
    "CUSTOM:<code>" is a custom operator with that custom code."""
    model = schema.ModelT()
    model.version = 3
    model.description = "edgekit test model"
    model.buffers = [schema.BufferT()]  # buffer 0: the empty sentinel
    model.operatorCodes = []
    code_index: Dict[str, int] = {}
    sub = schema.SubGraphT()
    sub.tensors, sub.operators = [], []
    for i, t in enumerate(tensors):
        st = schema.TensorT()
        st.shape = [int(d) for d in t.shape]
        st.type = _DTYPES[t.dtype][0]
        st.name = t.name or f"t{i}"
        st.quantization = _quantization(t)
        st.buffer = 0
        if t.data is not None:
            data = np.ascontiguousarray(np.asarray(t.data, dtype=t.np_dtype).reshape(t.shape))
            buf = schema.BufferT()
            buf.data = data.tobytes()
            model.buffers.append(buf)
            st.buffer = len(model.buffers) - 1
        sub.tensors.append(st)
    for name, op_inputs, op_outputs, options in ops:
        if name not in code_index:
            code = schema.OperatorCodeT()
            builtin = getattr(schema.BuiltinOperator, name.partition(":")[0])  # "CUSTOM:<code>": a custom op
            if name.startswith("CUSTOM:"):
                code.customCode = name.partition(":")[2]
            code.builtinCode = builtin
            code.deprecatedBuiltinCode = min(builtin, 127)
            code.version = 1
            model.operatorCodes.append(code)
            code_index[name] = len(model.operatorCodes) - 1
        so = schema.OperatorT()
        so.opcodeIndex = code_index[name]
        so.inputs = [int(v) for v in op_inputs]
        so.outputs = [int(v) for v in op_outputs]
        so.builtinOptionsType, so.builtinOptions = _options(name.partition(":")[0], options)
        sub.operators.append(so)
    sub.inputs = [int(v) for v in inputs]
    sub.outputs = [int(v) for v in outputs]
    model.subgraphs = [sub]
    builder = flatbuffers.Builder(1024)
    with _aligned_buffers():
        builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def build_model(op: str, inputs: Sequence[Optional[T]], outputs: Sequence[T], options: Optional[Dict] = None,
                version: int = 1) -> bytes:
    """One operator; non-constant inputs become graph inputs in order, None inputs are absent (-1)."""
    tensors: List[T] = []
    op_inputs, graph_inputs = [], []
    for t in inputs:
        if t is None:
            op_inputs.append(-1)
            continue
        tensors.append(t)
        op_inputs.append(len(tensors) - 1)
        if t.data is None:
            graph_inputs.append(len(tensors) - 1)
    first_out = len(tensors)
    tensors.extend(outputs)
    out_idx = list(range(first_out, len(tensors)))
    model = build_graph(tensors, [(op, op_inputs, out_idx, options)], graph_inputs, out_idx)
    if version != 1:
        model = _set_version(model, version)
    return model


def _set_version(model: bytes, version: int) -> bytes:
    obj = schema.ModelT.InitFromPackedBuf(model, 0)
    for code in obj.operatorCodes:
        code.version = version
    builder = flatbuffers.Builder(1024)
    with _aligned_buffers():
        builder.Finish(obj.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def reference(model: bytes, inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
    """Outputs of LiteRT with TFLite's reference kernels (BUILTIN_REF): the bit-exactness oracle."""
    interp = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interp.allocate_tensors()
    for detail, value in zip(interp.get_input_details(), inputs):
        interp.set_tensor(detail["index"], np.asarray(value, dtype=detail["dtype"]).reshape(detail["shape"]))
    interp.invoke()
    return [interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()]


def litert_sequence(model: bytes, xs: Sequence[np.ndarray]) -> List[np.ndarray]:
    """BUILTIN_REF outputs of consecutive invocations of one interpreter (its variable tensors keep the state between
    them): the oracle of stateful ops (SVDF, UNIDIRECTIONAL_SEQUENCE_LSTM, resource variables)."""
    it = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    outs = []
    for x in xs:
        it.set_tensor(i, x)
        it.invoke()
        outs.append(it.get_tensor(o).copy())
    return outs


def random_input(model: bytes, rng: np.random.Generator) -> List[np.ndarray]:
    """Uniform random values over each input's dtype range (floats: N(0, 1))."""
    interp = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    values = []
    for d in interp.get_input_details():
        dtype = np.dtype(d["dtype"])
        if dtype.kind == "f":
            values.append(rng.standard_normal(d["shape"]).astype(dtype))
        elif dtype.kind == "b":
            values.append(rng.random(d["shape"]) < 0.5)
        else:
            info = np.iinfo(dtype)
            values.append(rng.integers(info.min, info.max, size=d["shape"], endpoint=True).astype(dtype))
    return values
