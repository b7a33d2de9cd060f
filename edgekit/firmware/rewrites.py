"""The nearest rewrite the edgekit runtime does support, for an operator it does not.

Shown next to every rejected operator (edgekit.firmware.support), so a user whose model has a missing op learns
what to change in the model (or its export) to reach the board. Every operator a rewrite names in upper case is a
builtin the runtime implements; tests/firmware/test_rewrites.py checks that against the kernel scan, so a hint can
never point at another missing op.
"""
from __future__ import annotations

import re
from typing import Dict, Optional, Tuple

# builtin -> what to do instead (export-side changes are said in the training framework's terms)
BUILTIN_REWRITES: Dict[str, str] = {
    "ADD_N": "a chain of ADD (sum the tensors pairwise in the model)",
    "CUMSUM": "FULLY_CONNECTED or BATCH_MATMUL with a constant lower-triangular matrix of ones",
    "EMBEDDING_LOOKUP": "GATHER on axis 0 of the table",
    "L2_POOL_2D": "MUL (x * x) + AVERAGE_POOL_2D + SQRT",
    "POW": "MUL for a small integer exponent (x*x, x*x*x), SQRT / RSQRT for 1/2 and -1/2",
    "REDUCE_PROD": "EXP(SUM(LOG(x))) for positive inputs, or a chain of MUL over a short axis",
    "REVERSE_V2": "STRIDED_SLICE with stride -1 on the reversed axis",
    "SQUARE": "MUL of the tensor by itself",
    "FLOOR_DIV": "DIV (rounds to nearest in int8) where the rounding does not matter",
    "ROUND": "keep it out of the int8 graph (it only makes sense in float); quantize fully",
    "FLOOR": "keep it out of the int8 graph (it only makes sense in float); quantize fully",
    "CEIL": "keep it out of the int8 graph (it only makes sense in float); quantize fully",
    "SIN": "move it out of the network (feature computation on the host), or --runtime tflm",
    "COS": "move it out of the network (feature computation on the host), or --runtime tflm",
    "IF": "resolve the branch at export time (one subgraph per branch, each its own model)",
    "WHILE": "unroll the loop at export time (a fixed trip count), or run the loop on the host around the model",
    "UNIDIRECTIONAL_SEQUENCE_RNN": "FULLY_CONNECTED + ADD + TANH per step, the state in a variable "
                                   "(VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE)",
    "RNN": "FULLY_CONNECTED + ADD + TANH per step",
    "LSTM": "unroll the recurrence at export (Keras LSTM(..., unroll=True)): FULLY_CONNECTED + ADD + MUL + LOGISTIC + "
                                    "TANH per step, the state in variables (VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE)",
    "BIDIRECTIONAL_SEQUENCE_LSTM": "unroll the recurrence at export (Keras LSTM(..., unroll=True)): FULLY_CONNECTED + ADD + MUL + LOGISTIC + "
                                    "TANH per step, the state in variables (VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE)",
}

# custom operators real models ship with -> what to do instead
CUSTOM_REWRITES: Dict[str, str] = {
    "Convolution2DTransposeBias": "TRANSPOSE_CONV + ADD (MediaPipe's fused op: re-export with a standard "
                                  "Conv2DTranspose layer)",
    "TFLite_Detection_PostProcess": "cut the model before it and decode boxes / non-max suppression on the host "
                                    "(it is float post-processing, not a network layer)",
    "TransformLandmarks": "cut the model before it and apply the landmark transform on the host",
    "TransformTensorBilinear": "cut the model before it and run the crop on the host",
    "Landmarks2TransformMatrix": "cut the model before it and compute the matrix on the host",
    "MaxPoolingWithArgmax2D": "MAX_POOL_2D (if the arg-max indices are not needed) ",
    "MaxUnpooling2D": "RESIZE_NEAREST_NEIGHBOR (if the unpooling positions are not needed)",
}

_OP_NAME = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|\b(?:ADD|MUL|SUB|DIV|PAD|EXP|LOG|SQRT|RSQRT|RELU6|TANH|"
                      r"GATHER|SUM|MEAN|LOGISTIC|CONCATENATION|RESHAPE)\b")


def rewrite_for(op_name: str, custom_code: Optional[str] = None) -> Optional[str]:
    """The nearest supported rewrite for a builtin (or a custom op's code), or None if none is known."""
    if op_name == "CUSTOM":
        return CUSTOM_REWRITES.get(custom_code or "")
    return BUILTIN_REWRITES.get(op_name)


def named_ops(text: str) -> Tuple[str, ...]:
    """The builtin names a rewrite mentions (upper-case schema names)."""
    return tuple(sorted(set(_OP_NAME.findall(text))))
