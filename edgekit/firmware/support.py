"""What a .tflite contains (read straight from the flatbuffer) and whether a firmware runtime can run it.

The graph is read without LiteRT, so a model whose operators LiteRT itself lacks still gets a full
listing. Every vector length is checked against the file size before it is walked, so a corrupt or
truncated file gives an ``InvalidModelError`` instead of a hang or a Python traceback.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from edgekit._resources import data_dir
from edgekit.errors import InvalidModelError, UnsupportedOpError
from edgekit.support import OpSupport, SupportReport
from edgekit.tflite_model import check_tflite_bytes

KERNELS_DIR = data_dir("firmware") / "runtime" / "src" / "kernels"

RUNTIMES = ("edgekit", "tflm")

# The operators issue 7 asks the edgekit runtime for (each needs its kernel file to be present).
EDGEKIT_OPS = (
    "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "AVERAGE_POOL_2D", "MAX_POOL_2D", "ADD", "MUL", "RESHAPE",
    "SOFTMAX", "MEAN", "PAD", "CONCATENATION", "TRANSPOSE", "QUANTIZE", "DEQUANTIZE", "LOGISTIC", "HARD_SWISH",
)

# Which inputs of an op carry activations that must be int8 (None = every input). Other inputs are
# weights, biases, shapes or axes, which each kernel's prepare() validates.
_DATA_INPUTS: Dict[str, Optional[Tuple[int, ...]]] = {
    "CONV_2D": (0, 1), "DEPTHWISE_CONV_2D": (0, 1), "FULLY_CONNECTED": (0, 1), "AVERAGE_POOL_2D": (0,),
    "MAX_POOL_2D": (0,), "ADD": (0, 1), "MUL": (0, 1), "RESHAPE": (0,), "SOFTMAX": (0,), "MEAN": (0,), "PAD": (0,),
    "CONCATENATION": None, "TRANSPOSE": (0,), "LOGISTIC": (0,), "HARD_SWISH": (0,),
}
_QUANTIZE_INPUT_TYPES = ("FLOAT32", "INT8")
INT8_ONLY = "the edgekit runtime is int8-only"

_TYPE_NAMES = {0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 5: "STRING", 6: "BOOL", 7: "INT16",
               8: "COMPLEX64", 9: "INT8", 10: "FLOAT64", 11: "COMPLEX128", 12: "UINT64", 13: "RESOURCE",
               14: "VARIANT", 15: "UINT32", 16: "UINT16", 17: "INT4"}
_TYPE_BYTES = {"FLOAT32": 4, "FLOAT16": 2, "INT32": 4, "UINT8": 1, "INT64": 8, "BOOL": 1, "INT16": 2, "INT8": 1,
               "FLOAT64": 8, "UINT64": 8, "UINT32": 4, "UINT16": 2}


@dataclass(frozen=True)
class Tensor:
    index: int
    name: str
    type: str                  # schema name: INT8, FLOAT32, ...
    shape: Tuple[int, ...]
    constant: bool
    scales: Tuple[float, ...] = ()
    zero_points: Tuple[int, ...] = ()

    @property
    def elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def bytes(self) -> int:
        return self.elements * _TYPE_BYTES.get(self.type, 0)


@dataclass(frozen=True)
class Op:
    index: int
    name: str                  # builtin name (CONV_2D) or CUSTOM
    custom_code: str
    version: int
    inputs: Tuple[int, ...]
    outputs: Tuple[int, ...]

    @property
    def label(self) -> str:
        return f"CUSTOM '{self.custom_code}'" if self.name == "CUSTOM" else self.name


@dataclass
class Graph:
    """The parts of a .tflite the firmware tools need (first subgraph)."""

    tensors: List[Tensor]
    ops: List[Op]
    inputs: List[int]
    outputs: List[int]
    subgraphs: int
    source: str = "<bytes>"
    size: int = 0

    def location(self, op: Op) -> str:
        """'op #3 -> tensor 'conv1/Relu'' (the first of TFLite's ';'-joined fused names)."""
        names = [self.tensors[o].name.split(";")[0] for o in op.outputs if 0 <= o < len(self.tensors)]
        return f"op #{op.index} -> tensor '{names[0] if names else '?'}'"

    @property
    def op_names(self) -> List[str]:
        """Distinct builtin names in first-use order."""
        return list(dict.fromkeys(op.name for op in self.ops))

    def macs(self) -> Dict[int, int]:
        """Multiply-accumulates per op (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED; others 0)."""
        result = {}
        for op in self.ops:
            result[op.index] = _op_macs(self, op)
        return result


def _op_macs(graph: Graph, op: Op) -> int:
    try:
        out = graph.tensors[op.outputs[0]]
        weights = graph.tensors[op.inputs[1]]
    except IndexError:
        return 0
    if op.name == "CONV_2D" and len(weights.shape) == 4:
        _, kh, kw, cin = weights.shape
        return out.elements * kh * kw * cin
    if op.name == "DEPTHWISE_CONV_2D" and len(weights.shape) == 4:
        _, kh, kw, _ = weights.shape
        return out.elements * kh * kw
    if op.name == "FULLY_CONNECTED" and len(weights.shape) == 2:
        return out.elements * weights.shape[1]
    return 0


def _checked_length(n: int, data: bytes, what: str, source: str) -> int:
    if n < 0 or n * 4 > len(data):
        raise InvalidModelError(f"{source}: {what} count {n} is impossible for a {len(data)}-byte file (corrupt model)",
                                fix="re-export the model; the file is damaged or truncated")
    return n


def read_graph(data: bytes, source: str = "<bytes>") -> Graph:
    """Parse the flatbuffer; any structural problem becomes one ``InvalidModelError``."""
    check_tflite_bytes(data, source)
    from ai_edge_litert import schema_py_generated as schema

    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    try:
        model = schema.Model.GetRootAs(data, 0)
        subgraphs = _checked_length(model.SubgraphsLength(), data, "subgraph", source)
        if subgraphs < 1:
            raise InvalidModelError(f"{source} has no subgraph", fix="re-export the model")
        codes = []
        for i in range(_checked_length(model.OperatorCodesLength(), data, "operator code", source)):
            code = model.OperatorCodes(i)
            builtin = max(int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode()))
            custom = code.CustomCode()
            codes.append((names.get(builtin, f"BUILTIN_{builtin}"), custom.decode(errors="replace") if custom else "",
                          int(code.Version())))
        buffers = _checked_length(model.BuffersLength(), data, "buffer", source)
        sub = model.Subgraphs(0)
        tensors = []
        for i in range(_checked_length(sub.TensorsLength(), data, "tensor", source)):
            t = sub.Tensors(i)
            shape = tuple(int(v) for v in (t.ShapeAsNumpy() if t.ShapeLength() else ()))
            buffer = int(t.Buffer())
            constant = False
            if 0 < buffer < buffers:
                b = model.Buffers(buffer)
                length = b.DataLength()
                if length and b._tab.Vector(b._tab.Offset(4)) + length > len(data):
                    raise InvalidModelError(f"{source}: the data of tensor {i} runs past the end of the file (truncated model)",
                                            fix="re-export or re-download the model file")
                constant = length > 0 or int(b.Size()) > 0
            q = t.Quantization()
            scales: Tuple[float, ...] = ()
            zps: Tuple[int, ...] = ()
            if q is not None and q.ScaleLength():
                scales = tuple(float(v) for v in q.ScaleAsNumpy())
                zps = tuple(int(v) for v in q.ZeroPointAsNumpy()) if q.ZeroPointLength() else ()
            name = t.Name()
            tensors.append(Tensor(i, name.decode(errors="replace") if name else f"tensor{i}",
                                  _TYPE_NAMES.get(int(t.Type()), f"TYPE_{int(t.Type())}"), shape, constant, scales, zps))
        ops = []
        for i in range(_checked_length(sub.OperatorsLength(), data, "operator", source)):
            o = sub.Operators(i)
            index = int(o.OpcodeIndex())
            if not 0 <= index < len(codes):
                raise InvalidModelError(f"{source}: op #{i} names operator code {index} of {len(codes)} (corrupt model)",
                                        fix="re-export the model; the file is damaged")
            name, custom, version = codes[index]
            ins = tuple(int(v) for v in o.InputsAsNumpy()) if o.InputsLength() else ()
            outs = tuple(int(v) for v in o.OutputsAsNumpy()) if o.OutputsLength() else ()
            for t in ins + outs:
                if t >= len(tensors) or t < -1:
                    raise InvalidModelError(f"{source}: op #{i} uses tensor {t} of {len(tensors)} (corrupt model)",
                                            fix="re-export the model; the file is damaged")
            ops.append(Op(i, name, custom, version, ins, outs))
        graph_in = [int(v) for v in sub.InputsAsNumpy()] if sub.InputsLength() else []
        graph_out = [int(v) for v in sub.OutputsAsNumpy()] if sub.OutputsLength() else []
        for t in graph_in + graph_out:
            if not 0 <= t < len(tensors):
                raise InvalidModelError(f"{source}: graph input/output tensor {t} of {len(tensors)} (corrupt model)",
                                        fix="re-export the model; the file is damaged")
    except InvalidModelError:
        raise
    except Exception as exc:  # flatbuffers raises IndexError/struct.error/ValueError/... on damaged data
        raise InvalidModelError(
            f"{source} is not a readable TFLite flatbuffer ({type(exc).__name__}: {exc}); it may be truncated or corrupt",
            fix="re-export or re-download the model file",
        ) from exc
    return Graph(tensors, ops, graph_in, graph_out, subgraphs, source, len(data))


@lru_cache(maxsize=4)
def _kernel_index(kernels_dir: str) -> Dict[str, Tuple[str, ...]]:
    """Op name -> kernel source files defining ``const ek_kernel ek_kernel_<name>`` (scanned, not listed by hand)."""
    found: Dict[str, Tuple[str, ...]] = {}
    pattern = re.compile(r"const\s+ek_kernel\s+ek_kernel_(\w+)\s*=\s*\{\s*EK_OP_(\w+)")
    for path in sorted(Path(kernels_dir).glob("*.c")):
        for match in pattern.finditer(path.read_text(errors="replace")):
            op = match.group(2)
            found[op] = found.get(op, ()) + (path.name,)
    return found


def kernel_files(kernels_dir: Path = KERNELS_DIR) -> Dict[str, Tuple[str, ...]]:
    """Op name -> the kernel .c file(s) implementing it in this checkout."""
    return dict(_kernel_index(str(kernels_dir)))


# MicroMutableOpResolver methods (tensorflow/lite/micro/micro_mutable_op_resolver.h): builtin -> Add* name.
TFLM_RESOLVER_METHODS: Dict[str, str] = {
    "ABS": "AddAbs", "ADD": "AddAdd", "ADD_N": "AddAddN", "ARG_MAX": "AddArgMax", "ARG_MIN": "AddArgMin",
    "AVERAGE_POOL_2D": "AddAveragePool2D", "BATCH_MATMUL": "AddBatchMatMul", "BATCH_TO_SPACE_ND": "AddBatchToSpaceNd",
    "BROADCAST_TO": "AddBroadcastTo", "CAST": "AddCast", "CEIL": "AddCeil", "CONCATENATION": "AddConcatenation",
    "CONV_2D": "AddConv2D", "COS": "AddCos", "CUMSUM": "AddCumSum", "DEPTH_TO_SPACE": "AddDepthToSpace",
    "DEPTHWISE_CONV_2D": "AddDepthwiseConv2D", "DEQUANTIZE": "AddDequantize", "DIV": "AddDiv", "ELU": "AddElu",
    "EQUAL": "AddEqual", "EXP": "AddExp", "EXPAND_DIMS": "AddExpandDims", "FILL": "AddFill", "FLOOR": "AddFloor",
    "FLOOR_DIV": "AddFloorDiv", "FLOOR_MOD": "AddFloorMod", "FULLY_CONNECTED": "AddFullyConnected",
    "GATHER": "AddGather", "GATHER_ND": "AddGatherNd", "GREATER": "AddGreater", "GREATER_EQUAL": "AddGreaterEqual",
    "HARD_SWISH": "AddHardSwish", "IF": "AddIf", "L2_NORMALIZATION": "AddL2Normalization", "L2_POOL_2D": "AddL2Pool2D",
    "LEAKY_RELU": "AddLeakyRelu", "LESS": "AddLess", "LESS_EQUAL": "AddLessEqual", "LOG": "AddLog",
    "LOG_SOFTMAX": "AddLogSoftmax", "LOGICAL_AND": "AddLogicalAnd", "LOGICAL_NOT": "AddLogicalNot",
    "LOGICAL_OR": "AddLogicalOr", "LOGISTIC": "AddLogistic", "MAXIMUM": "AddMaximum", "MAX_POOL_2D": "AddMaxPool2D",
    "MEAN": "AddMean", "MINIMUM": "AddMinimum", "MIRROR_PAD": "AddMirrorPad", "MUL": "AddMul", "NEG": "AddNeg",
    "NOT_EQUAL": "AddNotEqual", "PACK": "AddPack", "PAD": "AddPad", "PADV2": "AddPadV2", "PRELU": "AddPrelu",
    "QUANTIZE": "AddQuantize", "REDUCE_MAX": "AddReduceMax", "RELU": "AddRelu", "RELU6": "AddRelu6",
    "RESHAPE": "AddReshape", "RESIZE_BILINEAR": "AddResizeBilinear", "RESIZE_NEAREST_NEIGHBOR": "AddResizeNearestNeighbor",
    "ROUND": "AddRound", "RSQRT": "AddRsqrt", "SELECT_V2": "AddSelectV2", "SHAPE": "AddShape", "SIN": "AddSin",
    "SOFTMAX": "AddSoftmax", "SPACE_TO_BATCH_ND": "AddSpaceToBatchNd", "SPACE_TO_DEPTH": "AddSpaceToDepth",
    "SPLIT": "AddSplit", "SPLIT_V": "AddSplitV", "SQUEEZE": "AddSqueeze", "SQRT": "AddSqrt", "SQUARE": "AddSquare",
    "SQUARED_DIFFERENCE": "AddSquaredDifference", "STRIDED_SLICE": "AddStridedSlice", "SUB": "AddSub", "SUM": "AddSum",
    "SVDF": "AddSvdf", "TANH": "AddTanh", "TRANSPOSE_CONV": "AddTransposeConv", "TRANSPOSE": "AddTranspose",
    "UNPACK": "AddUnpack", "ZEROS_LIKE": "AddZerosLike",
}


def _edgekit_verdict(graph: Graph, op: Op, kernels: Dict[str, Tuple[str, ...]]) -> Tuple[bool, str]:
    if op.name == "CUSTOM":
        return False, f"custom operator '{op.custom_code}': the edgekit runtime runs TFLite builtins only"
    if op.name not in EDGEKIT_OPS:
        return False, "the edgekit int8 runtime has no kernel for this operator"
    if op.name not in kernels:
        return False, f"no kernel file defines ek_kernel for {op.name} in {KERNELS_DIR} (incomplete checkout or install)"
    problems = []
    def tensor(i: int) -> Optional[Tensor]:
        return graph.tensors[i] if 0 <= i < len(graph.tensors) else None
    if op.name == "QUANTIZE":
        t_in, t_out = tensor(op.inputs[0]) if op.inputs else None, tensor(op.outputs[0]) if op.outputs else None
        if t_in is not None and t_in.type not in _QUANTIZE_INPUT_TYPES:
            problems.append(f"input '{t_in.name.split(';')[0]}' is {t_in.type} (QUANTIZE takes FLOAT32 or INT8)")
        if t_out is not None and t_out.type != "INT8":
            problems.append(f"output '{t_out.name.split(';')[0]}' is {t_out.type} (QUANTIZE must produce INT8)")
    elif op.name == "DEQUANTIZE":
        t_in, t_out = tensor(op.inputs[0]) if op.inputs else None, tensor(op.outputs[0]) if op.outputs else None
        if t_in is not None and t_in.type != "INT8":
            problems.append(f"input '{t_in.name.split(';')[0]}' is {t_in.type} (DEQUANTIZE takes INT8)")
        if t_out is not None and t_out.type != "FLOAT32":
            problems.append(f"output '{t_out.name.split(';')[0]}' is {t_out.type} (DEQUANTIZE produces FLOAT32)")
    else:
        positions = _DATA_INPUTS.get(op.name)
        picked = op.inputs if positions is None else [op.inputs[p] for p in positions if p < len(op.inputs)]
        bad: Dict[str, List[str]] = {}
        for i in list(picked) + list(op.outputs):
            t = tensor(i)
            if t is not None and t.type != "INT8":
                bad.setdefault(t.type, []).append(f"'{t.name.split(';')[0]}'")
        for kind, names in bad.items():
            shown = ", ".join(names[:2]) + (f" +{len(names) - 2} more" if len(names) > 2 else "")
            problems.append(f"{kind} tensor(s) {shown}")
        if problems:
            problems[-1] += f": {INT8_ONLY} (quantize fully, e.g. with `edgekit quantize`)"
    return (False, "; ".join(problems)) if problems else (True, "")


def _tflm_verdict(op: Op) -> Tuple[bool, str]:
    if op.name == "CUSTOM":
        return False, f"custom operator '{op.custom_code}': register it yourself with AddCustom() (not generated)"
    if op.name not in TFLM_RESOLVER_METHODS:
        return False, "TensorFlow Lite Micro's MicroMutableOpResolver has no Add method for this operator"
    return True, ""


def check_support(graph: Graph, runtime: str = "edgekit", *, kernels_dir: Path = KERNELS_DIR) -> SupportReport:
    """Every op accepted or rejected (with location and reason) for a firmware runtime."""
    if runtime not in RUNTIMES:
        from edgekit.errors import UnknownNameError

        raise UnknownNameError("firmware runtime", runtime, RUNTIMES)
    report = SupportReport(f"firmware-{runtime}")
    kernels = kernel_files(kernels_dir)
    if graph.subgraphs > 1:
        report.ops.append(OpSupport("SUBGRAPHS", f"model ({graph.subgraphs} subgraphs)", False,
                                    "control flow (more than one subgraph) is not supported; only subgraph 0 would run"))
    for op in graph.ops:
        ok, reason = _edgekit_verdict(graph, op, kernels) if runtime == "edgekit" else _tflm_verdict(op)
        report.ops.append(OpSupport(op.label, graph.location(op), ok, reason))
    return report


def require_support(graph: Graph, runtime: str = "edgekit") -> SupportReport:
    """The support report, or one ``UnsupportedOpError`` listing every rejected op."""
    report = check_support(graph, runtime)
    if not report.ok:
        target = "the edgekit int8 firmware runtime" if runtime == "edgekit" else "TensorFlow Lite Micro"
        error = UnsupportedOpError(report, target=target)
        rejected = report.rejected
        if runtime == "edgekit" and rejected and all(INT8_ONLY in o.reason for o in rejected):
            error.message = (f"the model is not full-int8: {len(rejected)} of {len(report.ops)} operators run on "
                             "non-int8 tensors\n" + "\n".join(f"  - {o.describe()}" for o in rejected[:10])
                             + (f"\n  - ... and {len(rejected) - 10} more" if len(rejected) > 10 else ""))
            error.fix = ("quantize it first (edgekit quantize MODEL --calib DATA) and pass model_int8.tflite, or "
                         "use --runtime tflm for a float model")
            raise error
        error.fix = (
            "replace these layers with supported ones and re-export"
            + (", or generate a TensorFlow Lite Micro project with --runtime tflm" if runtime == "edgekit" else "")
        )
        raise error
    return report
