"""Numpy implementations of MIL ops (the formulas of the MIL op definitions in coremltools 9.0).

Each function takes an ``OpCall`` (inputs by name, declared outputs) and returns the op's outputs. Float math is
done in float64 for reductions (conv, linear, matmul, pooling, norms) and float32 otherwise; the evaluator rounds
every result to the dtype the program declares for it (so fp16 programs get fp16 rounding after every op).
Quantization ops follow coremltools' own value inference exactly (optimize/_utils.py quantize_by_scale_and_zp,
dequantize_by_scale_and_zp; iOS18 constexpr_blockwise_shift_scale.decompress), including its dtypes.
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from edgekit.errors import InvalidModelError

OPS: Dict[str, Callable[["OpCall"], object]] = {}

NP_DTYPES = {
    "fp16": np.float16, "fp32": np.float32, "fp64": np.float64, "bool": np.bool_,
    "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
}
_QUANT_RANGES = {"int8": (-128, 127), "uint8": (0, 255)}


class OpCall:
    """One op being evaluated: its resolved inputs and declared outputs."""

    def __init__(self, op_type: str, name: str, inputs: Dict[str, list], out_shapes: List[Optional[tuple]],
                 literals: Dict[str, object]) -> None:
        self.op_type = op_type
        self.name = name
        self._inputs = inputs
        self.out_shapes = out_shapes
        self.literals = literals  # non-tensor literal inputs (e.g. classify's class list)

    def has(self, key: str) -> bool:
        return key in self._inputs

    def get(self, key: str, default=None):
        if key not in self._inputs:
            return default
        values = self._inputs[key]
        if len(values) != 1:
            raise InvalidModelError(f"op {self.op_type} '{self.name}': input '{key}' has {len(values)} values, expected 1")
        return values[0]

    def values(self, key: str) -> list:
        return list(self._inputs.get(key, []))

    def scalar(self, key: str, default=None):
        value = self.get(key, default)
        return value.item() if isinstance(value, np.ndarray) else value

    def ints(self, key: str, default: Sequence[int] = ()) -> List[int]:
        value = self.get(key)
        return [int(v) for v in np.asarray(value).reshape(-1)] if value is not None else list(default)

    def fail(self, message: str) -> InvalidModelError:
        return InvalidModelError(f"op {self.op_type} '{self.name}': {message}")


def op(*names: str):
    def wrap(fn):
        for name in names:
            OPS[name] = fn
        return fn
    return wrap


def f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


# ---------------------------------------------------------------- constants and compressed weights
@op("const")
def _const(c: OpCall):
    return c.get("val")


@op("constexpr_affine_dequantize")
def _constexpr_affine_dequantize(c: OpCall):
    """iOS16: scale * (quantized_data - zero_point) along ``axis`` (float32 math, result in scale's dtype)."""
    data = c.get("quantized_data")
    return dequantize_values(data, c.get("scale"), c.get("zero_point"), c.scalar("axis"))


@op("constexpr_blockwise_shift_scale")
def _constexpr_blockwise_shift_scale(c: OpCall):
    """iOS18: data.astype(scale.dtype); scale and offset repeated per block; scale * (data - offset)."""
    data, scale, offset = c.get("data"), c.get("scale"), c.get("offset")
    if data.ndim != scale.ndim:
        raise c.fail(f"data rank {data.ndim} != scale rank {scale.ndim}")
    data = data.astype(scale.dtype)
    for axis, (dim, blocks) in enumerate(zip(data.shape, scale.shape)):
        if dim % blocks:
            raise c.fail(f"axis {axis}: size {dim} is not a multiple of {blocks} scales")
        if dim // blocks > 1:
            scale = np.repeat(scale, dim // blocks, axis)
            if offset is not None:
                offset = np.repeat(offset, dim // blocks, axis)
    if offset is not None:
        data = data - offset
    return scale * data


@op("constexpr_cast")
def _constexpr_cast(c: OpCall):
    return c.get("source_val").astype(NP_DTYPES[c.scalar("output_dtype")])


@op("constexpr_lut_to_dense")
def _constexpr_lut_to_dense(c: OpCall):
    """iOS16 (lut, indices, shape) and iOS18 (indices, lut, vector_axis) forms, via coremltools' formulas."""
    if c.has("shape"):
        from coremltools.converters.mil.mil.ops.defs.iOS16.constexpr_ops import constexpr_lut_to_dense as ios16

        return ios16.decompress(c.get("lut"), c.get("indices"), c.get("shape"))
    from coremltools.optimize import _utils as optimize_utils

    return optimize_utils.lut_to_dense(c.get("indices"), c.get("lut"), c.scalar("vector_axis"))


@op("constexpr_sparse_to_dense")
def _constexpr_sparse_to_dense(c: OpCall):
    nonzero, mask = c.get("nonzero_data"), c.get("mask")
    if c.has("shape"):  # iOS16: packed bit mask + shape
        shape = c.ints("shape")
        out = np.zeros(int(np.prod(shape)), dtype=nonzero.dtype)
        out[np.where(np.unpackbits(mask, bitorder="little")[: out.size] != 0)] = nonzero
        return out.reshape(shape)
    out = np.zeros(mask.shape, dtype=nonzero.dtype)  # iOS18: mask is an unpacked uint1 tensor
    out[mask != 0] = nonzero
    return out


# ---------------------------------------------------------------- quantization (iOS17)
def _broadcast_param(param: Optional[np.ndarray], rank: int, axis: Optional[int]) -> Optional[np.ndarray]:
    if param is None or param.ndim == rank or param.ndim == 0:
        return param
    if axis is None:
        raise InvalidModelError("a per-channel quantization parameter has no axis")
    shape = [1] * rank
    shape[axis % rank] = param.size
    return param.reshape(shape)


def quantize_values(x: np.ndarray, scale: np.ndarray, zero_point: Optional[np.ndarray], axis: Optional[int],
                    output_dtype: str) -> np.ndarray:
    """clip(round_half_even(x / scale) + zero_point) in the input's dtype, as coremltools' value inference."""
    low, high = _QUANT_RANGES[output_dtype]
    scale = _broadcast_param(scale, x.ndim, axis)
    q = np.around(x / scale)
    if zero_point is not None:
        q = q + _broadcast_param(zero_point, x.ndim, axis).astype(np.float32)
    return np.clip(q, low, high).astype(NP_DTYPES[output_dtype])


def dequantize_values(q: np.ndarray, scale: np.ndarray, zero_point: Optional[np.ndarray], axis: Optional[int]) -> np.ndarray:
    """scale * (float32(q) - float32(zero_point)), returned in scale's dtype, as coremltools' value inference."""
    out = q.astype(np.float32)
    if zero_point is not None:
        out = out - _broadcast_param(zero_point, q.ndim, axis).astype(np.float32)
    out = out * _broadcast_param(scale, q.ndim, axis)
    return out.astype(scale.dtype)


@op("quantize")
def _quantize(c: OpCall):
    return quantize_values(c.get("input"), c.get("scale"), c.get("zero_point"), c.scalar("axis"), c.scalar("output_dtype"))


@op("dequantize")
def _dequantize(c: OpCall):
    return dequantize_values(c.get("input"), c.get("scale"), c.get("zero_point"), c.scalar("axis"))


# ---------------------------------------------------------------- elementwise
_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "real_div": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "pow": np.power,
    "floor_div": np.floor_divide, "mod": np.mod,
}
_COMPARE = {
    "equal": np.equal, "not_equal": np.not_equal, "greater": np.greater, "greater_equal": np.greater_equal,
    "less": np.less, "less_equal": np.less_equal, "logical_and": np.logical_and, "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}


def _binary(fn):
    def run(c: OpCall):
        x, y = c.get("x"), c.get("y")
        if np.issubdtype(np.asarray(x).dtype, np.floating) or np.issubdtype(np.asarray(y).dtype, np.floating):
            return fn(f32(x), f32(y))
        return fn(x, y)
    return run


for _name, _fn in _BINARY.items():
    OPS[_name] = _binary(_fn)


def _compare(fn):
    return lambda c: fn(c.get("x"), c.get("y"))


for _name, _fn in _COMPARE.items():
    OPS[_name] = _compare(_fn)
OPS["logical_not"] = lambda c: np.logical_not(c.get("x"))


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    x = f64(x)
    return np.where(x >= 0, 1.0 / (1.0 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1.0 + np.exp(-np.abs(x))))


_UNARY = {
    "relu": lambda c, x: np.maximum(x, 0),
    "relu6": lambda c, x: np.clip(x, 0, 6),
    "clip": lambda c, x: np.minimum(np.maximum(x, c.scalar("alpha")), c.scalar("beta")),
    "sigmoid": lambda c, x: _sigmoid(x),
    "sigmoid_hard": lambda c, x: np.minimum(np.maximum(c.scalar("alpha", 0.2) * f64(x) + c.scalar("beta", 0.5), 0), 1),
    "tanh": lambda c, x: np.tanh(f64(x)),
    "silu": lambda c, x: f64(x) * _sigmoid(x),
    "thresholded_relu": lambda c, x: np.where(x >= c.scalar("alpha", 1.0), x, 0),
    "clamped_relu": lambda c, x: np.minimum(np.where(x >= 0, f64(x), c.scalar("alpha") * f64(x)), c.scalar("beta")),
    "leaky_relu": lambda c, x: np.where(x >= 0, x, c.scalar("alpha", 0.01) * f64(x)),
    "elu": lambda c, x: np.where(x > 0, x, c.scalar("alpha", 1.0) * (np.exp(f64(x)) - 1)),
    "softplus": lambda c, x: np.logaddexp(0, f64(x)),
    "softsign": lambda c, x: f64(x) / (1 + np.abs(f64(x))),
    "linear_activation": lambda c, x: c.scalar("alpha") * f64(x) + c.scalar("beta", 0.0),
    "scaled_tanh": lambda c, x: c.scalar("alpha", 1.0) * np.tanh(c.scalar("beta", 1.0) * f64(x)),
    "exp": lambda c, x: np.exp(f64(x)),
    "exp2": lambda c, x: np.exp2(f64(x)),
    "log": lambda c, x: np.log(f64(x) + c.scalar("epsilon", 0.0)),
    "sqrt": lambda c, x: np.sqrt(f64(x)),
    "rsqrt": lambda c, x: 1.0 / np.sqrt(f64(x) + c.scalar("epsilon", 1e-12)),
    "inverse": lambda c, x: 1.0 / (f64(x) + c.scalar("epsilon", 1e-4)),
    "square": lambda c, x: f64(x) * f64(x),
    "abs": lambda c, x: np.abs(x),
    "sign": lambda c, x: np.sign(x),
    "floor": lambda c, x: np.floor(x),
    "ceil": lambda c, x: np.ceil(x),
    "round": lambda c, x: np.around(x),
    "erf": lambda c, x: _erf(x),
    "identity": lambda c, x: x,
}
def _unary(fn):
    return lambda c: fn(c, c.get("x"))


for _name, _fn in _UNARY.items():
    OPS[_name] = _unary(_fn)


@op("gelu")
def _gelu(c: OpCall):
    x = f64(c.get("x"))
    mode = c.scalar("mode", "EXACT")
    if mode == "TANH_APPROXIMATION":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    if mode == "SIGMOID_APPROXIMATION":
        return x * _sigmoid(1.702 * x)
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


@op("prelu")
def _prelu(c: OpCall):
    x, alpha = f64(c.get("x")), f64(c.get("alpha"))
    alpha = alpha.reshape([1, -1] + [1] * (x.ndim - 2))
    return np.where(x >= 0, x, alpha * x)


@op("softmax")
def _softmax(c: OpCall):
    x = f64(c.get("x"))
    axis = c.scalar("axis", -1)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@op("select")
def _select(c: OpCall):
    return np.where(c.get("cond"), c.get("a"), c.get("b"))


@op("cast")
def _cast(c: OpCall):
    return np.asarray(c.get("x")).astype(NP_DTYPES[c.scalar("dtype")])


# ---------------------------------------------------------------- linear algebra
@op("linear")
def _linear(c: OpCall):
    out = f64(c.get("x")) @ f64(c.get("weight")).T
    bias = c.get("bias")
    return out + f64(bias) if bias is not None else out


@op("matmul")
def _matmul(c: OpCall):
    x, y = f64(c.get("x")), f64(c.get("y"))
    if c.scalar("transpose_x", False):
        x = np.swapaxes(x, -1, -2)
    if c.scalar("transpose_y", False):
        y = np.swapaxes(y, -1, -2)
    return np.matmul(x, y)


# ---------------------------------------------------------------- convolution and pooling
def _pads(c: OpCall, spatial: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
          dilations: Sequence[int]) -> List[Tuple[int, int]]:
    pad_type = c.scalar("pad_type", "valid")
    n = len(spatial)
    if pad_type == "valid":
        return [(0, 0)] * n
    if pad_type == "custom":
        pad = c.ints("pad", [0] * 2 * n)
        return [(pad[2 * i], pad[2 * i + 1]) for i in range(n)]
    if pad_type in ("same", "same_lower"):
        result = []
        for size, k, s, d in zip(spatial, kernel, strides, dilations):
            total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
            small, large = total // 2, total - total // 2
            result.append((small, large) if pad_type == "same" else (large, small))
        return result
    raise c.fail(f"unknown pad_type {pad_type!r}")


def _windows(x: np.ndarray, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int]) -> np.ndarray:
    """(N, C, *out, *kernel) view of the (already padded) input."""
    n = len(kernel)
    effective = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    view = sliding_window_view(x, effective, axis=tuple(range(2, 2 + n)))
    index = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides) + tuple(
        slice(None, None, d) for d in dilations
    )
    return view[index]


@op("conv")
def _conv(c: OpCall):
    x, w, bias = f64(c.get("x")), f64(c.get("weight")), c.get("bias")
    n = x.ndim - 2
    groups = int(c.scalar("groups", 1))
    kernel = list(w.shape[2:])
    strides = c.ints("strides", [1] * n)
    dilations = c.ints("dilations", [1] * n)
    pads = _pads(c, x.shape[2:], kernel, strides, dilations)
    xp = np.pad(x, [(0, 0), (0, 0)] + pads)
    win = _windows(xp, kernel, strides, dilations)  # N, C, *O, *K
    batch, channels = x.shape[:2]
    out_sizes = win.shape[2:2 + n]
    cout, cin_g = w.shape[0], w.shape[1]
    if cin_g * groups != channels:
        raise c.fail(f"weight expects {cin_g * groups} input channels, input has {channels}")
    win = np.moveaxis(win, 1, 1 + n).reshape(batch, int(np.prod(out_sizes)), groups, cin_g * int(np.prod(kernel)))
    wg = w.reshape(groups, cout // groups, cin_g * int(np.prod(kernel)))
    out = np.einsum("npgk,gok->npgo", win, wg).reshape(batch, *out_sizes, cout)
    out = np.moveaxis(out, -1, 1)
    if bias is not None:
        out = out + f64(bias).reshape([1, -1] + [1] * n)
    return out


def _pool(c: OpCall, kind: str):
    x = f64(c.get("x"))
    n = x.ndim - 2
    kernel = c.ints("kernel_sizes")
    strides = c.ints("strides", [1] * n)
    pads = _pads(c, x.shape[2:], kernel, strides, [1] * n)
    if c.scalar("ceil_mode", False):
        extended = []
        for size, k, s, (lo, hi) in zip(x.shape[2:], kernel, strides, pads):
            out = (size + lo + hi - k + s - 1) // s + 1
            if (out - 1) * s >= size + lo:
                out -= 1
            extended.append((lo, max(hi, (out - 1) * s + k - size - lo)))
        extra = [(p[1] - q[1]) for p, q in zip(extended, pads)]
    else:
        extended, extra = pads, [0] * n
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, [(0, 0), (0, 0)] + list(extended), constant_values=fill)
    win = _windows(xp, kernel, strides, [1] * n)
    axes = tuple(range(-n, 0))
    if kind == "max":
        return win.max(axis=axes)
    total = win.sum(axis=axes)
    ones = np.ones((1, 1) + x.shape[2:])
    if c.scalar("exclude_padding_from_average", False):
        mask = np.pad(ones, [(0, 0), (0, 0)] + list(extended))
    else:  # padding counts, the ceil-mode overhang does not
        mask = np.pad(np.pad(ones, [(0, 0), (0, 0)] + list(pads), constant_values=1.0),
                      [(0, 0), (0, 0)] + [(0, e) for e in extra])
    counts = _windows(mask, kernel, strides, [1] * n).sum(axis=axes)
    return total / counts


OPS["max_pool"] = lambda c: _pool(c, "max")
OPS["avg_pool"] = lambda c: _pool(c, "avg")


@op("upsample_nearest_neighbor")
def _upsample_nearest(c: OpCall):
    x = c.get("x")
    sh, sw = float(c.scalar("scale_factor_height", 1)), float(c.scalar("scale_factor_width", 1))
    h, w = x.shape[-2:]
    rows = np.minimum(np.floor(np.arange(int(math.floor(h * sh))) / sh).astype(int), h - 1)
    cols = np.minimum(np.floor(np.arange(int(math.floor(w * sw))) / sw).astype(int), w - 1)
    return x[..., rows, :][..., cols]


# ---------------------------------------------------------------- normalization and reductions
def _scale_shift(c: OpCall, out: np.ndarray, shape=None) -> np.ndarray:
    """out * gamma + beta (each optional), the parameters reshaped to ``shape`` when given (per channel)."""
    for name, apply in (("gamma", np.multiply), ("beta", np.add)):
        if c.get(name) is not None:
            value = f64(c.get(name))
            out = apply(out, value.reshape(shape) if shape is not None else value)
    return out


@op("batch_norm")
def _batch_norm(c: OpCall):
    x = f64(c.get("x"))
    shape = [1, -1] + [1] * (x.ndim - 2)
    mean, var = f64(c.get("mean")).reshape(shape), f64(c.get("variance")).reshape(shape)
    out = (x - mean) / np.sqrt(var + c.scalar("epsilon", 1e-5))
    return _scale_shift(c, out, shape)


@op("instance_norm")
def _instance_norm(c: OpCall):
    x = f64(c.get("x"))
    axes = tuple(range(2, x.ndim))
    shape = [1, -1] + [1] * (x.ndim - 2)
    out = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + c.scalar("epsilon", 1e-5))
    return _scale_shift(c, out, shape)


@op("layer_norm")
def _layer_norm(c: OpCall):
    x = f64(c.get("x"))
    axes = tuple(c.ints("axes", range(x.ndim)))
    out = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + c.scalar("epsilon", 1e-5))
    return _scale_shift(c, out)


def _reduce(fn, *, as_float: bool = True):
    def run(c: OpCall):
        x = c.get("x")
        axes = c.get("axes")
        axes = None if axes is None else tuple(int(a) for a in np.asarray(axes).reshape(-1))
        return fn(f64(x) if as_float else x, axis=axes, keepdims=bool(c.scalar("keep_dims", False)))
    return run


OPS["reduce_mean"] = _reduce(np.mean)
OPS["reduce_sum"] = _reduce(np.sum)
OPS["reduce_prod"] = _reduce(np.prod)
OPS["reduce_max"] = _reduce(np.max, as_float=False)
OPS["reduce_min"] = _reduce(np.min, as_float=False)
OPS["reduce_l2_norm"] = _reduce(lambda x, axis, keepdims: np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdims)))
OPS["reduce_sum_square"] = _reduce(lambda x, axis, keepdims: np.sum(x * x, axis=axis, keepdims=keepdims))
OPS["reduce_log_sum_exp"] = _reduce(lambda x, axis, keepdims: np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims)))


def _arg(fn):
    def run(c: OpCall):
        out = fn(c.get("x"), axis=int(c.scalar("axis", -1)), keepdims=bool(c.scalar("keep_dims", False)))
        return out.astype(np.int32)
    return run


OPS["reduce_argmax"] = _arg(np.argmax)
OPS["reduce_argmin"] = _arg(np.argmin)


# ---------------------------------------------------------------- shape manipulation
@op("reshape")
def _reshape(c: OpCall):
    x = c.get("x")
    declared = c.out_shapes[0]
    if declared is not None:
        return x.reshape(declared)
    shape = c.ints("shape")
    shape = [x.shape[i] if s == 0 and i < x.ndim else s for i, s in enumerate(shape)]
    return x.reshape(shape)


@op("transpose")
def _transpose(c: OpCall):
    return np.transpose(c.get("x"), c.ints("perm"))


@op("squeeze")
def _squeeze(c: OpCall):
    x = c.get("x")
    axes = c.get("axes")
    if axes is None:
        return np.squeeze(x)
    return np.squeeze(x, axis=tuple(int(a) for a in np.asarray(axes).reshape(-1)))


@op("expand_dims")
def _expand_dims(c: OpCall):
    x = c.get("x")
    axes = sorted(int(a) % (x.ndim + len(c.ints("axes"))) for a in c.ints("axes"))
    for axis in axes:
        x = np.expand_dims(x, axis)
    return x


@op("concat")
def _concat(c: OpCall):
    values = c.values("values")
    axis = int(c.scalar("axis"))
    if c.scalar("interleave", False):
        raise c.fail("interleave=True is not implemented")
    return np.concatenate([np.asarray(v) for v in values], axis=axis)


@op("split")
def _split(c: OpCall):
    x = c.get("x")
    axis = int(c.scalar("axis"))
    sizes = c.get("split_sizes")
    if sizes is not None:
        return tuple(np.split(x, np.cumsum(np.asarray(sizes).reshape(-1))[:-1], axis=axis))
    return tuple(np.split(x, int(c.scalar("num_splits")), axis=axis))


@op("tile")
def _tile(c: OpCall):
    return np.tile(c.get("x"), c.ints("reps"))


@op("pad")
def _pad(c: OpCall):
    x = c.get("x")
    pad = c.ints("pad")
    k = len(pad) // 2
    widths = [(0, 0)] * (x.ndim - k) + [(pad[2 * i], pad[2 * i + 1]) for i in range(k)]
    mode = c.scalar("mode", "constant")
    if mode == "constant":
        return np.pad(x, widths, constant_values=c.scalar("constant_val", 0.0))
    if mode == "reflect":
        return np.pad(x, widths, mode="reflect")
    if mode == "replicate":
        return np.pad(x, widths, mode="edge")
    raise c.fail(f"unknown pad mode {mode!r}")


@op("slice_by_index")
def _slice_by_index(c: OpCall):
    x = c.get("x")
    rank = x.ndim
    begin, end = c.ints("begin"), c.ints("end")
    stride = c.ints("stride", [1] * rank)
    begin_mask = c.ints("begin_mask", [0] * rank)
    end_mask = c.ints("end_mask", [0] * rank)
    squeeze_mask = c.ints("squeeze_mask", [0] * rank)
    index = []
    for i in range(rank):
        b = None if begin_mask[i] else begin[i]
        e = None if end_mask[i] else end[i]
        if squeeze_mask[i]:
            index.append(begin[i])
        else:
            index.append(slice(b, e, stride[i]))
    return x[tuple(index)]


@op("slice_by_size")
def _slice_by_size(c: OpCall):
    x = c.get("x")
    begin, size = c.ints("begin"), c.ints("size")
    return x[tuple(slice(b, None if s == -1 else b + s) for b, s in zip(begin, size))]


@op("shape")
def _shape(c: OpCall):
    return np.asarray(c.get("x").shape, dtype=np.int32)


@op("gather")
def _gather(c: OpCall):
    x, indices = c.get("x"), np.asarray(c.get("indices")).astype(np.int64)
    if int(c.scalar("batch_dims", 0)) != 0:
        raise c.fail("batch_dims != 0 is not implemented")
    axis = int(c.scalar("axis", 0))
    indices = np.where(indices < 0, indices + x.shape[axis], indices)
    return np.take(x, indices, axis=axis)


# ---------------------------------------------------------------- classifier
@op("classify")
def _classify(c: OpCall):
    """Label of the largest probability, and the probabilities in class order (Core ML gives a dict)."""
    probabilities = np.asarray(c.get("probabilities"), np.float32)
    classes = c.literals.get("classes")
    if classes is None or len(classes) != probabilities.size:
        raise c.fail(f"{0 if classes is None else len(classes)} class labels for {probabilities.size} probabilities")
    label = classes[int(np.argmax(probabilities.reshape(-1)))]
    return np.asarray(label), probabilities
