"""Whether a firmware runtime (edgekit's or TFLM) can run a .tflite graph (read by edgekit.tflite_graph)."""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from edgekit._resources import data_dir
from edgekit.errors import UnsupportedOpError
from edgekit.firmware.optable import op_table
from edgekit.support import OpSupport, SupportReport
from edgekit.tflite_graph import Graph, Op, Tensor

KERNELS_DIR = data_dir("firmware") / "runtime" / "src" / "kernels"

RUNTIMES = ("edgekit", "tflm")

# The operators the edgekit runtime implements: the `edgekit-op` tags of the kernel sources (edgekit.firmware.optable;
# `edgekit ops` prints them), so a new kernel file is picked up without editing a list here.
EDGEKIT_OPS: Tuple[str, ...] = tuple(e.op for e in op_table(KERNELS_DIR))

# Which inputs of an op carry activations that must be int8 (None = every input). Other inputs are
# weights, biases, shapes or axes, which each kernel's prepare() validates.
_DATA_INPUTS: Dict[str, Optional[Tuple[int, ...]]] = {
    "CONV_2D": (0, 1), "DEPTHWISE_CONV_2D": (0, 1), "FULLY_CONNECTED": (0, 1), "AVERAGE_POOL_2D": (0,),
    "MAX_POOL_2D": (0,), "ADD": (0, 1), "MUL": (0, 1), "RESHAPE": (0,), "SOFTMAX": (0,), "MEAN": (0,), "PAD": (0,),
    "CONCATENATION": None, "TRANSPOSE": (0,), "LOGISTIC": (0,), "HARD_SWISH": (0,),
    "RELU": (0,), "RELU6": (0,), "RELU_N1_TO_1": (0,), "LEAKY_RELU": (0,), "PRELU": (0, 1),
    "TANH": (0,), "EXP": (0,), "LOG": (0,), "SQRT": (0,), "GELU": (0,), "ABS": (0,), "NEG": (0,), "RSQRT": (0,), "ELU": (0,),
    "SUB": (0, 1),
    "SQUARED_DIFFERENCE": (0, 1),
    "MAXIMUM": (0, 1),
    "MINIMUM": (0, 1),
    "EQUAL": (0, 1),
    "NOT_EQUAL": (0, 1),
    "LESS": (0, 1),
    "LESS_EQUAL": (0, 1),
    "GREATER": (0, 1),
    "GREATER_EQUAL": (0, 1),
    "LOGICAL_AND": (),
    "LOGICAL_OR": (),
    "SELECT": (1, 2),
    "SELECT_V2": (1, 2),
    "SUM": (0,),
    "REDUCE_MAX": (0,),
    "REDUCE_MIN": (0,),
    "ARG_MAX": (0,),
    "ARG_MIN": (0,),
    "DIV": (0, 1),
    "L2_NORMALIZATION": (0,),
    "BATCH_MATMUL": (0, 1),
    "LOG_SOFTMAX": (0,),
    "SPLIT": (1,),  # (axis, input)
    "SPLIT_V": (0,),
    "STRIDED_SLICE": (0,),
    "SLICE": (0,),
    "EXPAND_DIMS": (0,),
    "GATHER": (0,),  # positions: int16/int32/int64
    "RESIZE_NEAREST_NEIGHBOR": (0,),
    "RESIZE_BILINEAR": (0,),
    "FILL": (1,),  # (dims, value)
    "TRANSPOSE_CONV": (1, 2),  # (output_shape, weights, input, bias)
    "SPACE_TO_BATCH_ND": (0,),
    "BATCH_TO_SPACE_ND": (0,),
    "BROADCAST_TO": (0,),
    "GATHER_ND": (0,),  # indices: int16/int32/int64
    "PADV2": (0, 2),  # (input, paddings, constant_values)
    "MIRROR_PAD": (0,),
    "READ_VARIABLE": (), "ASSIGN_VARIABLE": (1,),
    "SVDF": (0, 1),  # time weights and the state are int16 by design (the integer SVDF path)
    "UNIDIRECTIONAL_SEQUENCE_LSTM": (0, 18),  # input and output state; the cell state is int16 (integer 8x8->16 LSTM)
}

# Per-op tensor type rules beyond "activations are int8" (each kernel's prepare() checks the same):
# outputs that are not int8, and inputs of a fixed non-int8 type (by position).
_OUTPUT_TYPES: Dict[str, Tuple[str, ...]] = {
    "EQUAL": ("BOOL",), "NOT_EQUAL": ("BOOL",), "LESS": ("BOOL",), "LESS_EQUAL": ("BOOL",), "GREATER": ("BOOL",),
    "GREATER_EQUAL": ("BOOL",),
    "LOGICAL_AND": ("BOOL",), "LOGICAL_OR": ("BOOL",),
    "ARG_MAX": ("INT32", "INT64"), "ARG_MIN": ("INT32", "INT64"),
}
_INPUT_TYPES: Dict[str, Dict[int, Tuple[str, ...]]] = {
    "LOGICAL_AND": {0: ("BOOL",), 1: ("BOOL",)}, "LOGICAL_OR": {0: ("BOOL",), 1: ("BOOL",)},
    "SELECT": {0: ("BOOL",)}, "SELECT_V2": {0: ("BOOL",)},
    "UNIDIRECTIONAL_SEQUENCE_LSTM": {19: ("INT16",)},
}


def _typed_problems(op: Op, tensor) -> List[str]:
    """Violations of _OUTPUT_TYPES / _INPUT_TYPES (the non-int8 tensors an op must have)."""
    problems = []
    rules = [(f"input {p}", op.inputs[p], kinds) for p, kinds in _INPUT_TYPES.get(op.name, {}).items() if p < len(op.inputs)]
    rules += [("output", o, _OUTPUT_TYPES[op.name]) for o in op.outputs] if op.name in _OUTPUT_TYPES else []
    for role, index, kinds in rules:
        t = tensor(index)
        if t is not None and t.type not in kinds:
            problems.append(f"{role} '{t.name.split(';')[0]}' is {t.type} ({op.name} {'takes' if role != 'output' else 'produces'} "
                            f"{' or '.join(kinds)})")
    return problems + (_lstm_problems(op) if op.name == "UNIDIRECTIONAL_SEQUENCE_LSTM" else [])


# UNIDIRECTIONAL_SEQUENCE_LSTM inputs (TFLite's lstm::full numbering) the edgekit kernel refuses when present or absent.
_LSTM_FEATURES = (("coupled input/forget gates (CIFG)", (1, 5, 12), False), ("peephole connections", (9, 10, 11), True),
                  ("a projection layer", (16, 17), True), ("layer normalization", (20, 21, 22, 23), True))


def _lstm_problems(op: Op) -> List[str]:
    """The LSTM variants kernels/lstm.c refuses (it runs the converter's Keras LSTM: none of these; time_major and
    the 5 intermediates of the 8x8->16 path are checked by its prepare())."""
    if len(op.inputs) != 24:
        return [f"UNIDIRECTIONAL_SEQUENCE_LSTM has {len(op.inputs)} inputs (the edgekit kernel takes the 24-input form)"]
    problems = []
    for what, positions, refused_if_present in _LSTM_FEATURES:
        present = any(op.inputs[p] >= 0 for p in positions)
        if present == refused_if_present:
            problems.append(f"UNIDIRECTIONAL_SEQUENCE_LSTM with {what} is not supported by the edgekit kernel "
                            "(a plain Keras LSTM is; or build with --runtime tflm)")
    return problems


# Pure data-movement ops: their data inputs and outputs may be of any of these types (the kernel moves bytes;
# shape/axis inputs are INT32 constants the kernel's prepare() checks). SHAPE outputs INT32/INT64, CAST converts.
_ANY_TYPE_OPS = frozenset({"SPLIT", "SPLIT_V", "UNPACK", "PACK", "STRIDED_SLICE", "SLICE", "SQUEEZE", "EXPAND_DIMS",
                           "GATHER", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "RESIZE_NEAREST_NEIGHBOR", "CAST", "FILL",
                           "SHAPE", "ZEROS_LIKE", "SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND", "BROADCAST_TO",
                           "GATHER_ND", "MIRROR_PAD"})
_MOVABLE_TYPES = ("INT8", "UINT8", "INT16", "INT32", "INT64", "FLOAT32", "BOOL")
# Ops that also take int16 activations (16x8 quantization: int8 weights where the op has any); input 0 and the outputs
# are int16 together (each kernel's prepare() checks the rest: zero points 0, scales).
_INT16_OPS = (
    "FULLY_CONNECTED",
    "LOGISTIC",
    "TANH",
)
# Resource-variable ops without int8 data: CALL_ONCE (no tensors), VAR_HANDLE (a RESOURCE handle).
_NO_DATA_OPS = ("CALL_ONCE", "VAR_HANDLE")
_QUANTIZE_INPUT_TYPES = ("FLOAT32", "INT8")
INT8_ONLY = "the edgekit runtime is int8-only"

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
    "ASSIGN_VARIABLE": "AddAssignVariable", "BROADCAST_ARGS": "AddBroadcastArgs", "CALL_ONCE": "AddCallOnce",
    "READ_VARIABLE": "AddReadVariable", "SLICE": "AddSlice",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "AddUnidirectionalSequenceLSTM", "VAR_HANDLE": "AddVarHandle", "WHILE": "AddWhile",
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


def _rewrite_hint(op: Op) -> str:
    """The nearest supported rewrite (edgekit.firmware.rewrites), and TFLM as the escape hatch where it runs the op."""
    from edgekit.firmware.rewrites import rewrite_for

    hint = rewrite_for(op.name, op.custom_code)
    text = f"; nearest supported rewrite: {hint}" if hint else ""
    if op.name in TFLM_RESOLVER_METHODS:
        text += "; or build with --runtime tflm, whose resolver has it"
    return text


def _edgekit_verdict(graph: Graph, op: Op, kernels: Dict[str, Tuple[str, ...]]) -> Tuple[bool, str]:
    if op.name == "CUSTOM":
        return False, (f"custom operator '{op.custom_code}': the edgekit runtime runs TFLite builtins only"
                       + _rewrite_hint(op))
    if op.name not in EDGEKIT_OPS:
        return False, "the edgekit int8 runtime has no kernel for this operator" + _rewrite_hint(op)
    if op.name not in kernels:
        return False, f"no kernel file defines ek_kernel for {op.name} in {KERNELS_DIR} (incomplete checkout or install)"
    problems = []
    def tensor(i: int) -> Optional[Tensor]:
        return graph.tensors[i] if 0 <= i < len(graph.tensors) else None
    if op.name == "QUANTIZE":
        t_in, t_out = tensor(op.inputs[0]) if op.inputs else None, tensor(op.outputs[0]) if op.outputs else None
        if t_in is not None and t_in.type not in _QUANTIZE_INPUT_TYPES:
            problems.append(f"input '{t_in.name.split(';')[0]}' is {t_in.type} (QUANTIZE takes FLOAT32 or INT8)")
        if t_out is not None and t_out.type not in ("INT8", "UINT8"):
            problems.append(f"output '{t_out.name.split(';')[0]}' is {t_out.type} (QUANTIZE produces INT8 or UINT8)")
    elif op.name in _NO_DATA_OPS:
        pass
    elif op.name == "DEQUANTIZE":
        t_in, t_out = tensor(op.inputs[0]) if op.inputs else None, tensor(op.outputs[0]) if op.outputs else None
        if t_in is not None and t_in.type != "INT8":
            problems.append(f"input '{t_in.name.split(';')[0]}' is {t_in.type} (DEQUANTIZE takes INT8)")
        if t_out is not None and t_out.type != "FLOAT32":
            problems.append(f"output '{t_out.name.split(';')[0]}' is {t_out.type} (DEQUANTIZE produces FLOAT32)")
    else:
        positions = _DATA_INPUTS.get(op.name)
        picked = op.inputs if positions is None else [op.inputs[p] for p in positions if p < len(op.inputs)]
        int8_outputs = [] if op.name in _OUTPUT_TYPES else list(op.outputs)
        bad: Dict[str, List[str]] = {}
        first = tensor(op.inputs[0]) if op.inputs else None
        wide = op.name in _INT16_OPS and first is not None and first.type == "INT16"  # 16x8: int16 activations
        for k, i in enumerate(list(picked) + int8_outputs):
            t = tensor(i)
            if op.name in _ANY_TYPE_OPS:
                allowed: Tuple[str, ...] = _MOVABLE_TYPES
            else:
                allowed = ("INT16",) if wide and (k == 0 or k >= len(picked)) else ("INT8",)
            if t is not None and t.type not in allowed:
                bad.setdefault(t.type, []).append(f"'{t.name.split(';')[0]}'")
        for kind, names in bad.items():
            shown = ", ".join(names[:2]) + (f" +{len(names) - 2} more" if len(names) > 2 else "")
            problems.append(f"{kind} tensor(s) {shown}")
        if problems and op.name in _ANY_TYPE_OPS:
            problems[-1] += f": {op.name} moves {', '.join(_MOVABLE_TYPES)} tensors only"
        elif problems:
            problems[-1] += f": {INT8_ONLY} (quantize fully, e.g. with `edgekit quantize`)"
        problems.extend(_typed_problems(op, tensor))
    return (False, "; ".join(problems)) if problems else (True, "")


def _tflm_verdict(op: Op) -> Tuple[bool, str]:
    if op.name == "CUSTOM":
        return False, f"custom operator '{op.custom_code}': register it yourself with AddCustom() (not generated)"
    if op.name not in TFLM_RESOLVER_METHODS:
        return False, "TensorFlow Lite Micro's MicroMutableOpResolver has no Add method for this operator"
    return True, ""


def _subgraph_reason(runtime: str) -> str:
    if runtime == "edgekit":
        return ("control flow (IF / WHILE subgraphs) or several signatures are not supported; the edgekit runtime runs "
                "a main graph plus at most one CALL_ONCE init subgraph (resource variables)")
    return "control flow (more than one subgraph) is not supported; only subgraph 0 would run"


def check_support(graph: Graph, runtime: str = "edgekit", *, kernels_dir: Path = KERNELS_DIR) -> SupportReport:
    """Every op accepted or rejected (with location and reason) for a firmware runtime."""
    if runtime not in RUNTIMES:
        from edgekit.errors import UnknownNameError

        raise UnknownNameError("firmware runtime", runtime, RUNTIMES)
    report = SupportReport(f"firmware-{runtime}")
    kernels = kernel_files(kernels_dir)
    calls = sum(op.name == "CALL_ONCE" for op in graph.ops)
    if graph.subgraphs > 1 and not (runtime == "edgekit" and calls == 1 and graph.subgraphs == 2):
        report.ops.append(OpSupport("SUBGRAPHS", f"model ({graph.subgraphs} subgraphs)", False, _subgraph_reason(runtime)))
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

