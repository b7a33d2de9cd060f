"""Whether a firmware runtime (edgekit's or TFLM) can run a .tflite graph (read by edgekit.tflite_graph)."""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from edgekit._resources import data_dir
from edgekit.errors import UnsupportedOpError
from edgekit.support import OpSupport, SupportReport
from edgekit.tflite_graph import Graph, Op, Tensor

KERNELS_DIR = data_dir("firmware") / "runtime" / "src" / "kernels"

RUNTIMES = ("edgekit", "tflm")

# The operators issue 7 asks the edgekit runtime for (each needs its kernel file to be present).
EDGEKIT_OPS = (
    "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "AVERAGE_POOL_2D", "MAX_POOL_2D", "ADD", "MUL", "RESHAPE",
    "SOFTMAX", "MEAN", "PAD", "CONCATENATION", "TRANSPOSE", "QUANTIZE", "DEQUANTIZE", "LOGISTIC", "HARD_SWISH",
    "CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE",
    "SVDF",
)

# Which inputs of an op carry activations that must be int8 (None = every input). Other inputs are
# weights, biases, shapes or axes, which each kernel's prepare() validates.
_DATA_INPUTS: Dict[str, Optional[Tuple[int, ...]]] = {
    "CONV_2D": (0, 1), "DEPTHWISE_CONV_2D": (0, 1), "FULLY_CONNECTED": (0, 1), "AVERAGE_POOL_2D": (0,),
    "MAX_POOL_2D": (0,), "ADD": (0, 1), "MUL": (0, 1), "RESHAPE": (0,), "SOFTMAX": (0,), "MEAN": (0,), "PAD": (0,),
    "CONCATENATION": None, "TRANSPOSE": (0,), "LOGISTIC": (0,), "HARD_SWISH": (0,),
    "READ_VARIABLE": (), "ASSIGN_VARIABLE": (1,),
    "SVDF": (0, 1),  # time weights and the state are int16 by design (the integer SVDF path)
}
# Ops that also take int16 activations with int8 weights (16x8 quantization).
_INT16_OPS = ("FULLY_CONNECTED",)
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
        bad: Dict[str, List[str]] = {}
        first = tensor(op.inputs[0]) if op.inputs else None
        wide = op.name in _INT16_OPS and first is not None and first.type == "INT16"  # 16x8: int16 activations
        for k, i in enumerate(list(picked) + list(op.outputs)):
            t = tensor(i)
            allowed = "INT16" if wide and (k == 0 or k >= len(picked)) else "INT8"
            if t is not None and t.type != allowed:
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

