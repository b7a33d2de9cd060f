"""Optional kernel paths a model needs: the C macros a firmware or library built for that model defines.

A device build for one model compiles the runtime with ``EK_MODEL_PATHS`` plus one ``EK_NEED_<PATH>`` per optional
kernel path its model uses; the other optional paths are left out of flash (their kernels then refuse such an op
with EK_ERR_UNSUPPORTED: never run wrongly; a fast path left out only hands its layers to the general one). Builds
without ``EK_MODEL_PATHS`` (the host runtime, ``make check``) compile every path. See firmware/runtime/README.md ("Optional kernel paths")."""
from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional, Sequence

from edgekit.tflite_graph import Graph, Op

MODEL_PATHS = "EK_MODEL_PATHS"


def _input_type(graph: Graph, op: Op, i: int = 0) -> str:
    if i >= len(op.inputs) or op.inputs[i] < 0 or op.inputs[i] >= len(graph.tensors):
        return ""
    return graph.tensors[op.inputs[i]].type


def _output_type(graph: Graph, op: Op, i: int = 0) -> str:
    if i >= len(op.outputs) or op.outputs[i] < 0 or op.outputs[i] >= len(graph.tensors):
        return ""
    return graph.tensors[op.outputs[i]].type


def _small_pointwise(graph: Graph, op: Op) -> bool:
    """A 1x1 CONV_2D on 4, 8 or 12 input channels: a superset of the layers ek_conv_pw<G>_dsp runs (it also needs
    stride 1, no padding, the fast requantization and no narrow clamp)."""
    if op.name != "CONV_2D" or len(op.inputs) < 2 or not 0 <= op.inputs[1] < len(graph.tensors):
        return False
    shape = tuple(graph.tensors[op.inputs[1]].shape)
    return len(shape) == 4 and shape[1:3] == (1, 1) and shape[3] in (4, 8, 12)


# macro -> whether an op needs it (the kernel compiles the path under the macro)
PATHS: Dict[str, Callable[[Graph, Op], bool]] = {
    # kernels/fully_connected.c: int16 activations (16x8)
    "EK_NEED_FC_INT16": lambda g, op: op.name == "FULLY_CONNECTED" and _input_type(g, op) == "INT16",
    # kernels/softmax.c: int16 output
    "EK_NEED_SOFTMAX_INT16": lambda g, op: op.name == "SOFTMAX" and _output_type(g, op) == "INT16",
    # kernels/conv_2d.c: Cortex-M4 assembly for 1x1 layers on 4, 8 or 12 input channels (ek_conv_pw<G>_dsp, ~1.3 KB);
    # a build without it runs such a layer on the general 1x1 path (slower, same outputs), it refuses nothing
    "EK_NEED_CONV_SMALL_POINTWISE": _small_pointwise,
}


# kernels/fully_connected.c: the int8-weight path without Helium, taken by a prepared model whose weights stay int8
FC_INT8 = "EK_NEED_FC_INT8"


def _int8_fully_connected(graph: Graph, op: Op) -> bool:
    return op.name == "FULLY_CONNECTED" and _input_type(graph, op) == "INT8" and _input_type(graph, op, 1) == "INT8"


def needed_paths(graph: Graph, int8_weights: bool = False, int8_ops: Optional[Iterable[int]] = None) -> List[str]:
    """The EK_NEED_* macros of the optional kernel paths ``graph``'s ops use, sorted. ``int8_weights``: the prepared
    model keeps its weights int8 (EK_OPTIMIZE_INT8_WEIGHTS), so an int8 FULLY_CONNECTED takes FC_PATH_INT8;
    ``int8_ops``: only these op indices keep theirs int8 (a per-op choice: --weights auto)."""
    macros = {macro for macro, needs in PATHS.items() if any(needs(graph, op) for op in graph.ops)}
    kept = range(len(graph.ops)) if int8_weights else (int8_ops or ())
    if any(0 <= i < len(graph.ops) and _int8_fully_connected(graph, graph.ops[i]) for i in kept):
        macros.add(FC_INT8)
    return sorted(macros)


# kernels/depthwise_conv_2d.c: the blocked row paths of DEPTHWISE_CONV_2D (~0.8 KB on Cortex-M4), taken by a
# row-streamed group holding one; without them such a row range runs TFLite's per-pixel loop (same outputs, slower)
DW_ROWS = "EK_NEED_DW_ROWS"


def group_paths(group_ops: Iterable[Sequence[str]]) -> List[str]:
    """The EK_NEED_* macros the prepared plan's row-streamed groups need (``group_ops``: each group's op names)."""
    return [DW_ROWS] if any("DEPTHWISE_CONV_2D" in ops for ops in group_ops) else []


def path_defines(graph_paths: List[str]) -> List[str]:
    """EK_MODEL_PATHS and the needed EK_NEED_* macros (names, without -D)."""
    return [MODEL_PATHS, *graph_paths]
