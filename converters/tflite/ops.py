"""Which TFLite builtin operators have int8 kernels (TFLite int8 quantization spec)."""
from __future__ import annotations

# Builtins with int8 kernels in TFLite's builtin op set (TFLITE_BUILTINS_INT8).
INT8_OPS = frozenset(
    """ABS ADD ARG_MAX ARG_MIN AVERAGE_POOL_2D BATCH_MATMUL BATCH_TO_SPACE_ND BROADCAST_TO
    CONCATENATION CONV_2D DEPTH_TO_SPACE DEPTHWISE_CONV_2D DEQUANTIZE ELU EQUAL EXP EXPAND_DIMS
    FILL FULLY_CONNECTED GATHER GATHER_ND GELU GREATER GREATER_EQUAL HARD_SWISH L2_NORMALIZATION
    LEAKY_RELU LESS LESS_EQUAL LOG_SOFTMAX LOGISTIC MAX_POOL_2D MAXIMUM MEAN MINIMUM MIRROR_PAD
    MUL NEG NOT_EQUAL PACK PAD PADV2 PRELU QUANTIZE REDUCE_MAX REDUCE_MIN REDUCE_PROD RELU
    RELU6 RELU_N1_TO_1 RELU_0_TO_1 RESHAPE RESIZE_BILINEAR RESIZE_NEAREST_NEIGHBOR RSQRT SELECT
    SELECT_V2 SHAPE SLICE SOFTMAX SPACE_TO_BATCH_ND SPACE_TO_DEPTH SPLIT SPLIT_V SQUARED_DIFFERENCE
    SQUEEZE STRIDED_SLICE SUB SUM TANH TILE TRANSPOSE TRANSPOSE_CONV UNPACK""".split()
)

# Builtins known to exist only for float (or integer index) data: the quantizer leaves them
# in float, which a full-int8 target cannot run.
FLOAT_ONLY_OPS = {
    "SIN": "TFLite has no int8 SIN kernel",
    "COS": "TFLite has no int8 COS kernel",
    "LOG": "TFLite has no int8 LOG kernel",
    "POW": "TFLite has no int8 POW kernel",
    "FLOOR": "TFLite has no int8 FLOOR kernel",
    "CEIL": "TFLite has no int8 CEIL kernel",
    "ROUND": "TFLite has no int8 ROUND kernel",
    "FLOOR_DIV": "TFLite has no int8 FLOOR_DIV kernel",
    "FLOOR_MOD": "TFLite has no int8 FLOOR_MOD kernel",
    "DIV": "TFLite's DIV has no int8 kernel (uint8 only); multiply by a reciprocal instead",
    "SQRT": "TFLite has no int8 SQRT kernel",
    "SQUARE": "TFLite has no int8 SQUARE kernel; use MUL(x, x)",
    "RFFT2D": "TFLite has no int8 RFFT2D kernel",
    "RANDOM_UNIFORM": "random ops cannot be quantized",
    "RANDOM_STANDARD_NORMAL": "random ops cannot be quantized",
    "CUSTOM": "custom operators are not TFLite builtins (TFLITE_BUILTINS_INT8 only)",
    "DELEGATE": "a delegate node is not a TFLite builtin",
}


def int8_verdict(op: str) -> tuple[bool, str]:
    """(supported, reason) for one builtin name, before quantizing."""
    if op in FLOAT_ONLY_OPS:
        return False, FLOAT_ONLY_OPS[op]
    if op.startswith("Flex") or op.startswith("FLEX"):
        return False, "a TensorFlow (Flex) op, not a TFLite builtin"
    if op in INT8_OPS:
        return True, ""
    return True, "not in edgekit's int8 table; checked after quantization"
