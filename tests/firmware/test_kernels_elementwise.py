"""Elementwise / data-movement kernels of the edgekit C runtime against LiteRT BUILTIN_REF, bit for bit.

ADD, MUL (broadcasting up to 6-D), SOFTMAX, LOGISTIC, HARD_SWISH, MEAN, PAD, CONCATENATION, TRANSPOSE,
QUANTIZE, DEQUANTIZE, RESHAPE: seeded random shapes, broadcasts, axes, scales, zero points and activations,
single-op models from tests/firmware/opmodels.py run through the host build of the runtime
(edgekit.firmware.host_runtime) and through LiteRT with OpResolverType.BUILTIN_REF. Every comparison
demands 0 differing elements (float outputs: identical bits). Plus a MobileNet-style PyTorch model through
`edgekit quantize`, and the rejections prepare() must make.
"""
from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import List, Sequence

import numpy as np
import pytest

from edgekit.errors import EdgekitError
from edgekit.firmware.host_runtime import HostRuntime
from tests.firmware.opmodels import T, build_graph, build_model, random_input, reference

ACTIVATIONS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]


# --- helpers -------------------------------------------------------------------------------------------

def log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def zp(rng: np.random.Generator) -> int:
    return int(rng.integers(-128, 128))


# the in-place .tflite path and a prepared model with the overlapped plan (speed / ram variants alternating)
PREPARED_MODES = itertools.cycle(("speed", "ram"))


def differing(expected: np.ndarray, got: np.ndarray) -> int:
    """Number of differing elements; floats compare by bits (so -0.0 != 0.0 and NaN payloads count)."""
    assert expected.shape == got.shape and expected.dtype == got.dtype, (expected.shape, got.shape, expected.dtype, got.dtype)
    if expected.dtype.kind == "f":
        width = {2: np.uint16, 4: np.uint32, 8: np.uint64}[expected.dtype.itemsize]
        return int(np.count_nonzero(expected.view(width) != got.view(width)))
    return int(np.count_nonzero(expected != got))


def assert_bit_exact(model: bytes, inputs: Sequence[np.ndarray], what: str = "") -> List[np.ndarray]:
    expected = reference(model, inputs)
    # the in-place .tflite path, then the prepared model with the overlapped plan forced on (speed / ram variants)
    for optimize in (None, next(PREPARED_MODES)):
        got = HostRuntime(model, optimize=optimize).invoke(inputs)
        assert len(expected) == len(got)
        for i, (e, g) in enumerate(zip(expected, got)):
            n = differing(e, g)
            assert n == 0, f"{what} (optimize={optimize}): output {i}: {n} of {e.size} elements differ from LiteRT BUILTIN_REF"
    return got


def all_int8_values(shape_total: int = 256) -> np.ndarray:
    return np.arange(-128, 128, dtype=np.int8)[:shape_total]


def const_i32(values) -> T:
    arr = np.asarray(values, dtype=np.int32)
    return T(list(arr.shape), dtype="int32", scale=None, data=arr)


def random_dims(rng: np.random.Generator, rank: int, max_elements: int, max_dim: int = 6) -> List[int]:
    dims = [int(rng.integers(1, max_dim + 1)) for _ in range(rank)]
    while rank and math.prod(dims) > max_elements:
        dims[int(np.argmax(dims))] -= 1
    return dims


def broadcast_pair(rng: np.random.Generator):
    """Two shapes that broadcast (NumPy rules, ranks 0..6) and their broadcast shape."""
    rank = int(rng.integers(0, 7))
    base = random_dims(rng, rank, 1500, max_dim=5)
    shapes = []
    for _ in range(2):
        r = int(rng.integers(0, rank + 1))
        dims = base[rank - r:]
        shapes.append([1 if rng.random() < 0.35 else d for d in dims])
    if rng.random() < 0.5 and rank:  # one operand keeps the full rank
        shapes[int(rng.integers(0, 2))] = list(base)
    out = list(np.broadcast_shapes(tuple(shapes[0]), tuple(shapes[1])))
    return shapes[0], shapes[1], out


# --- ADD / MUL -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(40))
def test_add_broadcast_random(seed):
    rng = np.random.default_rng(1000 + seed)
    s1, s2, so = broadcast_pair(rng)
    sc1, sc2 = log_uniform(rng, 1e-3, 1.0), log_uniform(rng, 1e-3, 1.0)
    out_scale = max(sc1, sc2) * log_uniform(rng, 0.3, 4.0)
    act = ACTIVATIONS[seed % 4]
    model = build_model("ADD", [T(s1, scale=sc1, zero_point=zp(rng)), T(s2, scale=sc2, zero_point=zp(rng))],
                        [T(so, scale=out_scale, zero_point=zp(rng))], {"fused_activation_function": act})
    assert_bit_exact(model, random_input(model, rng), f"ADD {s1}+{s2}->{so} {act}")


@pytest.mark.parametrize("seed", range(40))
def test_mul_broadcast_random(seed):
    rng = np.random.default_rng(2000 + seed)
    s1, s2, so = broadcast_pair(rng)
    sc1, sc2 = log_uniform(rng, 1e-3, 1.0), log_uniform(rng, 1e-3, 1.0)
    # real multiplier sc1 * sc2 / out_scale from ~1/200 to ~20: right shifts and (above 1) left shifts
    out_scale = sc1 * sc2 * log_uniform(rng, 0.05, 200.0)
    act = ACTIVATIONS[(seed + 1) % 4]
    model = build_model("MUL", [T(s1, scale=sc1, zero_point=zp(rng)), T(s2, scale=sc2, zero_point=zp(rng))],
                        [T(so, scale=out_scale, zero_point=zp(rng))], {"fused_activation_function": act})
    assert_bit_exact(model, random_input(model, rng), f"MUL {s1}*{s2}->{so} {act}")


@pytest.mark.parametrize("op", ["ADD", "MUL"])
def test_binary_op_with_constant_operand_and_same_shapes(op):
    rng = np.random.default_rng(7)
    for shape_b in ([1, 6, 5, 16], [16], [1, 1, 1, 16], []):
        const = rng.integers(-128, 128, size=shape_b, dtype=np.int8)
        model = build_model(op, [T([1, 6, 5, 16], scale=0.05, zero_point=-3), T(shape_b, scale=0.02, zero_point=9, data=const)],
                            [T([1, 6, 5, 16], scale=0.07 if op == "ADD" else 0.004, zero_point=1)])
        assert_bit_exact(model, random_input(model, rng), f"{op} with constant {shape_b}")


def all_pairs_inputs() -> List[np.ndarray]:
    """Every (x, y) int8 pair once: x varies along axis 0, y along axis 1 (shapes [256, 256])."""
    v = np.arange(-128, 128, dtype=np.int8)
    return [np.repeat(v[:, None], 256, axis=1), np.repeat(v[None, :], 256, axis=0)]


# Output scale / larger input scale: the ADD output rescale shift runs from 0 (slow path; below ratio 2^-19 TFLite
# aborts) through 1..22 (the exact SMMULR fast path) to 23+ (slow path again); equal input scales give input
# shifts of 0 (no rounding).
ADD_SCALE_CASES = [
    (0.02, 0.02, 2.0 ** -18.5), (0.02, 0.02, 2.0 ** -17.5), (0.05, 0.011, 2.0 ** -10), (0.011, 0.05, 0.3),
    (0.1, 0.1, 1.0), (0.004, 0.9, 4.0), (0.9, 1e-6, 2.0 ** 1.5), (0.03, 0.07, 2.0 ** 2.5), (0.07, 0.03, 2.0 ** 3.5),
    (0.2, 0.3, 2.0 ** 6),
]


@pytest.mark.parametrize("case", range(len(ADD_SCALE_CASES)))
def test_add_every_input_pair_same_shape_and_broadcast(case):
    """All 65,536 input pairs, same-shape and both broadcast directions, on the fast and the general path."""
    sc1, sc2, ratio = ADD_SCALE_CASES[case]
    rng = np.random.default_rng(3000 + case)
    zps = [(zp(rng), zp(rng), zp(rng)), (-128, 127, -128), (127, -128, 127)][case % 3]
    out = T([256, 256], scale=max(sc1, sc2) * ratio, zero_point=zps[2])
    act = ACTIVATIONS[case % 4]
    full = all_pairs_inputs()
    for s1, s2 in (([256, 256], [256, 256]), ([256, 1], [1, 256]), ([1, 256], [256, 1])):
        model = build_model("ADD", [T(s1, scale=sc1, zero_point=zps[0]), T(s2, scale=sc2, zero_point=zps[1])], [out],
                            {"fused_activation_function": act})
        inputs = [full[0] if s1 == [256, 256] else np.arange(-128, 128, dtype=np.int8).reshape(s1),
                  full[1] if s2 == [256, 256] else np.arange(-128, 128, dtype=np.int8).reshape(s2)]
        assert_bit_exact(model, inputs, f"ADD all pairs {s1}+{s2} scales {sc1},{sc2} ratio {ratio} {act}")


# Real MUL multipliers 2^k * 1.37: shifts from -27 (general path) through -22..13 (fast path) to 15 (general).
MUL_MULTIPLIER_EXPONENTS = [-27, -23, -22, -21, -12, -7, -1, 0, 1, 5, 12, 13, 15]


@pytest.mark.parametrize("exponent", MUL_MULTIPLIER_EXPONENTS)
def test_mul_every_input_pair_same_shape_and_broadcast(exponent):
    rng = np.random.default_rng(4000 + exponent)
    sc1, sc2 = 0.02, 0.03
    out_scale = sc1 * sc2 / (1.37 * 2.0 ** exponent)
    zps = (zp(rng), zp(rng), zp(rng)) if exponent % 2 else (-128, 127, 0)
    act = ACTIVATIONS[exponent % 4]
    full = all_pairs_inputs()
    for s1, s2 in (([256, 256], [256, 256]), ([256, 1], [1, 256]), ([1, 256], [256, 1])):
        model = build_model("MUL", [T(s1, scale=sc1, zero_point=zps[0]), T(s2, scale=sc2, zero_point=zps[1])],
                            [T([256, 256], scale=out_scale, zero_point=zps[2])], {"fused_activation_function": act})
        inputs = [full[0] if s1 == [256, 256] else np.arange(-128, 128, dtype=np.int8).reshape(s1),
                  full[1] if s2 == [256, 256] else np.arange(-128, 128, dtype=np.int8).reshape(s2)]
        assert_bit_exact(model, inputs, f"MUL all pairs {s1}*{s2} multiplier 1.37*2^{exponent} {act}")


# --- SOFTMAX / LOGISTIC / HARD_SWISH -------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(24))
def test_softmax_random(seed):
    rng = np.random.default_rng(3000 + seed)
    shape = random_dims(rng, int(rng.integers(1, 5)), 2000, max_dim=12)
    shape[-1] = int(rng.integers(1, 40))
    scale = log_uniform(rng, 1e-3, 2.0)
    beta = float(rng.choice([1.0, 0.5, 2.0, float(rng.uniform(0.1, 3.0))]))
    model = build_model("SOFTMAX", [T(shape, scale=scale, zero_point=zp(rng))], [T(shape, scale=1 / 256, zero_point=-128)],
                        {"beta": beta})
    x = random_input(model, rng)
    if seed % 3 == 0:  # rows dominated by one value: exercises the diff_min cut-off and the full-sum path
        x[0] = np.where(rng.random(x[0].shape) < 0.8, np.int8(127), x[0]).astype(np.int8)
    assert_bit_exact(model, x, f"SOFTMAX {shape} scale {scale} beta {beta}")


def test_softmax_int8_to_int16():
    rng = np.random.default_rng(31)
    for scale in (0.01, 0.1, 0.7):
        model = build_model("SOFTMAX", [T([4, 33], scale=scale, zero_point=5)], [T([4, 33], dtype="int16", scale=1 / 32768, zero_point=0)])
        assert_bit_exact(model, random_input(model, rng), f"SOFTMAX int8->int16 scale {scale}")


def test_logistic_where_glibc_expf_is_not_correctly_rounded():
    """Input scale 0x1.000016p-7, q - zp = 1: the one table entry where glibc's expf rounding matters."""
    scale = float.fromhex("0x1.000016p-7")
    for zero_point in (0, -1, 50):
        model = build_model("LOGISTIC", [T([256], scale=scale, zero_point=zero_point)], [T([256], scale=1 / 256, zero_point=-128)])
        assert_bit_exact(model, [all_int8_values()], f"LOGISTIC scale {scale} zp {zero_point}")


@pytest.mark.parametrize("seed", range(30))
def test_logistic_every_input_value(seed):
    """All 256 int8 inputs per model, so the whole lookup table is compared."""
    rng = np.random.default_rng(4000 + seed)
    scale = log_uniform(rng, 1e-3, 1.0) if seed else 1 / 128  # 1/128 puts table entries next to a rounding tie
    model = build_model("LOGISTIC", [T([256], scale=scale, zero_point=zp(rng))], [T([256], scale=1 / 256, zero_point=-128)])
    assert_bit_exact(model, [all_int8_values()], f"LOGISTIC scale {scale}")


@pytest.mark.parametrize("seed", range(30))
def test_hard_swish_every_input_value(seed):
    rng = np.random.default_rng(5000 + seed)
    in_scale = log_uniform(rng, 1e-3, 2.0)  # spans reluish exponents below and above 0
    out_scale = in_scale * log_uniform(rng, 0.02, 3.0)
    model = build_model("HARD_SWISH", [T([2, 128], scale=in_scale, zero_point=zp(rng))],
                        [T([2, 128], scale=out_scale, zero_point=zp(rng))])
    assert_bit_exact(model, [all_int8_values().reshape(2, 128)], f"HARD_SWISH in {in_scale} out {out_scale}")


# --- MEAN ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(36))
def test_mean_random_axes(seed):
    rng = np.random.default_rng(6000 + seed)
    rank = int(rng.integers(1, 6))
    shape = random_dims(rng, rank, 3000, max_dim=9)
    # at least one axis: an empty axis vector has no buffer data, so the model reader sees a non-constant tensor
    n_axes = int(rng.integers(1, rank + 1))
    axes = [int(a) for a in rng.choice(rank, size=n_axes, replace=False)]
    axes = [a - rank if rng.random() < 0.3 else a for a in axes]  # negative spellings
    if axes and rng.random() < 0.2:
        axes.append(axes[0])  # a duplicate
    keep = bool(seed % 2)
    resolved = sorted({a % rank for a in axes})
    out_shape = [1 if d in resolved else s for d, s in enumerate(shape)] if keep else \
        [s for d, s in enumerate(shape) if d not in resolved]
    in_scale = log_uniform(rng, 1e-3, 1.0)
    out_scale = in_scale * log_uniform(rng, 0.1, 3.0)
    model = build_model("MEAN", [T(shape, scale=in_scale, zero_point=zp(rng)), const_i32(axes)],
                        [T(out_shape, scale=out_scale, zero_point=zp(rng))], {"keep_dims": keep})
    assert_bit_exact(model, random_input(model, rng), f"MEAN {shape} axes {axes} keep_dims {keep}")


def test_mean_global_average_pool_both_keep_dims():
    rng = np.random.default_rng(61)
    for keep, out_shape in ((True, [2, 1, 1, 24]), (False, [2, 24])):
        for in_scale, out_scale in ((0.05, 0.05), (0.05, 0.01), (0.02, 0.3)):
            model = build_model("MEAN", [T([2, 7, 7, 24], scale=in_scale, zero_point=-17), const_i32([1, 2])],
                                [T(out_shape, scale=out_scale, zero_point=4)], {"keep_dims": keep})
            assert_bit_exact(model, random_input(model, rng), f"MEAN GAP keep_dims {keep} {in_scale}->{out_scale}")


# --- PAD / TRANSPOSE / CONCATENATION / RESHAPE --------------------------------------------------------

@pytest.mark.parametrize("seed", range(24))
def test_pad_random(seed):
    rng = np.random.default_rng(7000 + seed)
    rank = int(rng.integers(1, 6))
    shape = random_dims(rng, rank, 800)
    pads = rng.integers(0, 4, size=(rank, 2))
    pads[rng.random(rank) < 0.3] = 0
    out_shape = [s + int(a + b) for s, (a, b) in zip(shape, pads)]
    pad_dtype = "int64" if seed % 3 == 0 else "int32"
    paddings = T([rank, 2], dtype=pad_dtype, scale=None, data=pads.astype(np.int64 if pad_dtype == "int64" else np.int32))
    z = zp(rng)
    dtype = "float32" if seed % 5 == 4 else "int8"
    q = dict(scale=0.03, zero_point=z) if dtype == "int8" else dict(scale=None)
    model = build_model("PAD", [T(shape, dtype=dtype, **q), paddings], [T(out_shape, dtype=dtype, **q)])
    assert_bit_exact(model, random_input(model, rng), f"PAD {dtype} {shape} {pads.tolist()}")


@pytest.mark.parametrize("seed", range(24))
def test_transpose_random(seed):
    rng = np.random.default_rng(8000 + seed)
    rank = int(rng.integers(1, 7))
    shape = random_dims(rng, rank, 2000)
    perm = [int(p) for p in rng.permutation(rank)]
    spelled = [p - rank if rng.random() < 0.25 else p for p in perm]
    dtype = ["int8", "int8", "float32", "int16", "int32"][seed % 5]
    q = dict(scale=0.1, zero_point=zp(rng)) if dtype == "int8" else dict(scale=None)
    model = build_model("TRANSPOSE", [T(shape, dtype=dtype, **q), const_i32(spelled)],
                        [T([shape[p] for p in perm], dtype=dtype, **q)])
    assert_bit_exact(model, random_input(model, rng), f"TRANSPOSE {dtype} {shape} perm {spelled}")


@pytest.mark.parametrize("seed", range(20))
def test_concatenation_random(seed):
    rng = np.random.default_rng(9000 + seed)
    rank = int(rng.integers(1, 6))
    base = random_dims(rng, rank, 500)
    axis = int(rng.integers(0, rank))
    n = int(rng.integers(1, 6))
    scale, z = log_uniform(rng, 1e-3, 1.0), zp(rng)
    inputs, total = [], 0
    for i in range(n):
        dims = list(base)
        dims[axis] = int(rng.integers(1, 5))
        total += dims[axis]
        data = rng.integers(-128, 128, size=dims, dtype=np.int8) if (i == 1 and seed % 3 == 0) else None
        inputs.append(T(dims, scale=scale, zero_point=z, data=data))
    out = list(base)
    out[axis] = total
    spelled = axis - rank if seed % 2 else axis
    model = build_model("CONCATENATION", inputs, [T(out, scale=scale, zero_point=z)], {"axis": spelled})
    assert_bit_exact(model, random_input(model, rng), f"CONCATENATION {n} inputs axis {spelled} of {base}")


def test_concatenation_with_different_scales_is_rejected_like_litert():
    """LiteRT's int8 CONCATENATION refuses inputs quantized differently from the output; so do we."""
    model = build_model("CONCATENATION", [T([2, 3], scale=0.1, zero_point=0), T([2, 3], scale=0.2, zero_point=0)],
                        [T([2, 6], scale=0.2, zero_point=0)], {"axis": 1})
    with pytest.raises(Exception):
        reference(model, [np.zeros((2, 3), np.int8)] * 2)
    with pytest.raises(EdgekitError, match="scale and zero point"):
        HostRuntime(model).invoke([np.zeros((2, 3), np.int8)] * 2)


def test_reshape_copies_or_runs_in_place():
    rng = np.random.default_rng(11)
    # graph input -> RESHAPE: the input stays readable, so a copy
    model = build_model("RESHAPE", [T([2, 3, 4], scale=0.1, zero_point=3)], [T([4, 6], scale=0.1, zero_point=3)],
                        {"new_shape": [4, 6]})
    assert_bit_exact(model, random_input(model, rng), "RESHAPE of a graph input")
    # ADD -> RESHAPE -> ADD: the intermediate dies at RESHAPE, so the planner may put the output on it
    tensors = [T([1, 4, 6], scale=0.1, zero_point=2), T([1, 4, 6], scale=0.1, zero_point=2), T([1, 4, 6], scale=0.2, zero_point=-1),
               T([24], scale=0.2, zero_point=-1), T([24], scale=0.3, zero_point=5)]
    ops = [("ADD", [0, 1], [2], {}), ("RESHAPE", [2], [3], {"new_shape": [24]}), ("ADD", [3, 3], [4], {})]
    model = build_graph(tensors, ops, [0, 1], [4])
    assert_bit_exact(model, random_input(model, rng), "ADD -> RESHAPE -> ADD")


def test_reshape_with_shape_tensor_input():
    rng = np.random.default_rng(12)
    model = build_model("RESHAPE", [T([3, 8], scale=0.1, zero_point=-4), const_i32([2, 12])], [T([2, 12], scale=0.1, zero_point=-4)])
    assert_bit_exact(model, random_input(model, rng), "RESHAPE with a shape tensor")


# --- QUANTIZE / DEQUANTIZE -----------------------------------------------------------------------------

SPECIAL_FLOATS = np.array([0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 1e30, -1e30, np.inf, -np.inf, 1e-40, -1e-40],
                          dtype=np.float32)


@pytest.mark.parametrize("seed", range(16))
def test_quantize_float_to_int8(seed):
    rng = np.random.default_rng(10000 + seed)
    scale, z = log_uniform(rng, 1e-3, 1.0), zp(rng)
    x = (rng.standard_normal(400) * scale * 80).astype(np.float32)
    ties = ((rng.integers(-300, 300, 100) + 0.5) * np.float32(scale)).astype(np.float32)  # near half-way points
    x = np.concatenate([x, ties, SPECIAL_FLOATS * np.float32(scale)]).astype(np.float32)
    model = build_model("QUANTIZE", [T([x.size], dtype="float32", scale=None)], [T([x.size], scale=scale, zero_point=z)])
    assert_bit_exact(model, [x], f"QUANTIZE float->int8 scale {scale} zp {z}")


@pytest.mark.parametrize("zero_point", [-7, 0, 9])
def test_quantize_nan_inf_and_huge_inputs_match_litert(zero_point):
    """Outside int32 (NaN, inf, |x/scale| >= 2^31) LiteRT's float->int32 cast gives INT32_MIN, then + zero point."""
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, 3e9, -3e9, 2147483520.0, -2147483520.0, 1.0], np.float32)
    model = build_model("QUANTIZE", [T([x.size], dtype="float32", scale=None)], [T([x.size], scale=1.0, zero_point=zero_point)])
    assert_bit_exact(model, [x], f"QUANTIZE specials zp {zero_point}")


@pytest.mark.parametrize("seed", range(16))
def test_requantize_8bit(seed):
    rng = np.random.default_rng(11000 + seed)
    in_type, out_type = [("int8", "int8"), ("int8", "int8"), ("int8", "uint8"), ("uint8", "int8")][seed % 4]
    in_scale = log_uniform(rng, 1e-3, 1.0)
    out_scale = in_scale * log_uniform(rng, 0.05, 20.0) if seed % 5 else in_scale
    zin = zp(rng) + (128 if in_type == "uint8" else 0)
    zout = zp(rng) + (128 if out_type == "uint8" else 0)
    if seed % 8 == 2:  # the int8 -> uint8 "same scale, zero point + 128" fast path of reference Requantize
        out_scale, zout = in_scale, zin + 128
    model = build_model("QUANTIZE", [T([256], dtype=in_type, scale=in_scale, zero_point=zin)],
                        [T([256], dtype=out_type, scale=out_scale, zero_point=zout)])
    x = all_int8_values().view(np.uint8) if in_type == "uint8" else all_int8_values()
    assert_bit_exact(model, [x], f"QUANTIZE {in_type}->{out_type}")


@pytest.mark.parametrize("seed", range(12))
def test_dequantize_exact_floats(seed):
    rng = np.random.default_rng(12000 + seed)
    in_type = ["int8", "int8", "uint8", "int16"][seed % 4]
    scale = log_uniform(rng, 1e-8, 10.0)
    z = {"int8": zp(rng), "uint8": zp(rng) + 128, "int16": 0}[in_type]
    model = build_model("DEQUANTIZE", [T([3, 100], dtype=in_type, scale=scale, zero_point=z)], [T([3, 100], dtype="float32", scale=None)])
    assert_bit_exact(model, random_input(model, rng), f"DEQUANTIZE {in_type} scale {scale}")


def test_dequantize_per_channel_constant():
    """A per-channel int8 constant (as weights are stored) dequantized to float: one scale per channel."""
    rng = np.random.default_rng(13)
    for axis in (0, 2):
        shape = [5, 3, 4]
        scales = [log_uniform(rng, 1e-4, 1.0) for _ in range(shape[axis])]
        weights = rng.integers(-127, 128, size=shape, dtype=np.int8)
        tensors = [T(shape, scale=scales, zero_point=0, data=weights, quantized_dimension=axis),
                   T(shape, dtype="float32", scale=None)]
        model = build_graph(tensors, [("DEQUANTIZE", [0], [1], None)], [], [1])
        assert_bit_exact(model, [], f"DEQUANTIZE per-channel axis {axis}")


# --- multi-op graph with float I/O ---------------------------------------------------------------------

def test_float_io_graph_quantize_transpose_pad_mean_softmax_dequantize():
    rng = np.random.default_rng(14)
    tensors = [
        T([1, 3, 6, 5], dtype="float32", scale=None),          # 0 float NCHW input
        T([1, 3, 6, 5], scale=0.02, zero_point=-10),           # 1 QUANTIZE
        const_i32([0, 2, 3, 1]),                               # 2 perm
        T([1, 6, 5, 3], scale=0.02, zero_point=-10),           # 3 TRANSPOSE -> NHWC
        const_i32([[0, 0], [1, 1], [0, 2], [0, 0]]),           # 4 paddings
        T([1, 8, 7, 3], scale=0.02, zero_point=-10),           # 5 PAD
        T([1, 8, 7, 3], scale=0.03, zero_point=4),             # 6 HARD_SWISH
        T([1, 8, 7, 3], scale=0.05, zero_point=-2),            # 7 ADD(5, 6)
        const_i32([1, 2]),                                     # 8 axes
        T([1, 3], scale=0.04, zero_point=1),                   # 9 MEAN
        T([1, 3], scale=1 / 256, zero_point=-128),             # 10 SOFTMAX
        T([1, 3], dtype="float32", scale=None),                # 11 DEQUANTIZE
    ]
    ops = [("QUANTIZE", [0], [1], None), ("TRANSPOSE", [1, 2], [3], {}), ("PAD", [3, 4], [5], {}),
           ("HARD_SWISH", [5], [6], {}), ("ADD", [5, 6], [7], {}), ("MEAN", [7, 8], [9], {"keep_dims": False}),
           ("SOFTMAX", [9], [10], {"beta": 1.0}), ("DEQUANTIZE", [10], [11], {})]
    model = build_graph(tensors, ops, [0], [11])
    for _ in range(3):
        x = (rng.standard_normal((1, 3, 6, 5)) * 1.2).astype(np.float32)
        assert_bit_exact(model, [x], "float I/O chain")


# --- prepare() rejects what would make eval unsafe -----------------------------------------------------

BAD_MODELS = {
    "ADD shapes that do not broadcast": lambda: build_model("ADD", [T([2, 3]), T([4, 3])], [T([4, 3])]),
    "ADD output not the broadcast shape": lambda: build_model("ADD", [T([2, 3]), T([1, 3])], [T([3, 3])]),
    "MUL output rank wrong": lambda: build_model("MUL", [T([2, 3]), T([3])], [T([1, 2, 3])]),
    "ADD output scale far too small": lambda: build_model("ADD", [T([4], scale=1.0), T([4], scale=1.0)], [T([4], scale=1e-7)]),
    "SOFTMAX output scale not 1/256": lambda: build_model("SOFTMAX", [T([2, 5])], [T([2, 5], scale=0.01, zero_point=-128)]),
    "SOFTMAX output shape": lambda: build_model("SOFTMAX", [T([2, 5])], [T([2, 6], scale=1 / 256, zero_point=-128)]),
    "LOGISTIC output scale not 1/256": lambda: build_model("LOGISTIC", [T([8])], [T([8], scale=1 / 255, zero_point=-128)]),
    "HARD_SWISH output scale too small": lambda: build_model("HARD_SWISH", [T([8], scale=1.0)], [T([8], scale=1e-4)]),
    "MEAN axis out of range": lambda: build_model("MEAN", [T([2, 3, 4]), const_i32([3])], [T([2, 3])], {"keep_dims": False}),
    "MEAN output shape": lambda: build_model("MEAN", [T([2, 3, 4]), const_i32([1])], [T([2, 3])], {"keep_dims": False}),
    "MEAN keep_dims shape": lambda: build_model("MEAN", [T([2, 3, 4]), const_i32([1])], [T([2, 4])], {"keep_dims": True}),
    "MEAN non-constant axes": lambda: build_model("MEAN", [T([2, 3, 4]), T([1], dtype="int32", scale=None)], [T([2, 4])],
                                                  {"keep_dims": False}),
    "PAD negative amount": lambda: build_model("PAD", [T([4, 4]), const_i32([[1, -1], [0, 0]])], [T([4, 4])]),
    "PAD output shape": lambda: build_model("PAD", [T([4, 4]), const_i32([[1, 1], [0, 0]])], [T([6, 5])]),
    "PAD paddings shape": lambda: build_model("PAD", [T([4, 4]), const_i32([[1, 1, 0], [0, 0, 0]])], [T([6, 4])]),
    "TRANSPOSE repeated axis": lambda: build_model("TRANSPOSE", [T([2, 3]), const_i32([0, 0])], [T([2, 2])]),
    "TRANSPOSE axis out of range": lambda: build_model("TRANSPOSE", [T([2, 3]), const_i32([0, 2])], [T([2, 3])]),
    "TRANSPOSE output shape": lambda: build_model("TRANSPOSE", [T([2, 3]), const_i32([1, 0])], [T([2, 3])]),
    "CONCATENATION axis out of range": lambda: build_model("CONCATENATION", [T([2, 3]), T([2, 3])], [T([2, 6])], {"axis": 2}),
    "CONCATENATION inputs differ off-axis": lambda: build_model("CONCATENATION", [T([2, 3]), T([3, 3])], [T([5, 3])], {"axis": 1}),
    "CONCATENATION output shape": lambda: build_model("CONCATENATION", [T([2, 3]), T([2, 3])], [T([2, 7])], {"axis": 1}),
    "RESHAPE element count": lambda: build_model("RESHAPE", [T([2, 3])], [T([7])], {"new_shape": [7]}),
    "QUANTIZE shape": lambda: build_model("QUANTIZE", [T([4], dtype="float32", scale=None)], [T([5])]),
    "DEQUANTIZE float output shape": lambda: build_model("DEQUANTIZE", [T([4])], [T([5], dtype="float32", scale=None)]),
}


@pytest.mark.parametrize("name", sorted(BAD_MODELS))
def test_prepare_rejects_inconsistent_models(name):
    model = BAD_MODELS[name]()
    with pytest.raises(EdgekitError):
        rt = HostRuntime(model)
        rt.invoke(random_input(model, np.random.default_rng(0)))


# --- sanitizers ----------------------------------------------------------------------------------------

@pytest.mark.slow
def test_kernels_under_address_and_undefined_behaviour_sanitizers():
    """A mix of the ops above through the ASan + UBSan build of the runtime (out-of-bounds access aborts)."""
    rng = np.random.default_rng(15)
    models = [
        build_model("ADD", [T([2, 1, 3, 5], scale=0.1, zero_point=3), T([4, 1, 5], scale=0.2, zero_point=-2)],
                    [T([2, 4, 3, 5], scale=0.3, zero_point=1)], {"fused_activation_function": "RELU6"}),
        build_model("MUL", [T([3, 1], scale=0.1, zero_point=3), T([1, 7], scale=0.2, zero_point=-2)], [T([3, 7], scale=0.001)]),
        build_model("SOFTMAX", [T([3, 17], scale=0.3, zero_point=1)], [T([3, 17], scale=1 / 256, zero_point=-128)]),
        build_model("LOGISTIC", [T([256], scale=0.04, zero_point=1)], [T([256], scale=1 / 256, zero_point=-128)]),
        build_model("HARD_SWISH", [T([256], scale=0.04, zero_point=1)], [T([256], scale=0.02, zero_point=-5)]),
        build_model("MEAN", [T([2, 3, 4, 5], scale=0.04), const_i32([0, -1])], [T([3, 4], scale=0.02)], {"keep_dims": False}),
        build_model("PAD", [T([1, 3, 4, 2]), const_i32([[0, 1], [2, 0], [1, 1], [0, 3]])], [T([2, 5, 6, 5])]),
        build_model("TRANSPOSE", [T([2, 3, 1, 4, 2, 3]), const_i32([5, 3, 1, 0, 4, 2])], [T([3, 4, 3, 2, 2, 1])]),
        build_model("CONCATENATION", [T([2, 3, 2]), T([2, 1, 2]), T([2, 4, 2])], [T([2, 8, 2])], {"axis": -2}),
        build_model("QUANTIZE", [T([9], dtype="float32", scale=None)], [T([9], scale=0.1, zero_point=3)]),
        build_model("DEQUANTIZE", [T([9], scale=0.1, zero_point=3)], [T([9], dtype="float32", scale=None)]),
        build_model("RESHAPE", [T([2, 6])], [T([3, 4])], {"new_shape": [3, 4]}),
    ]
    for model in models:
        inputs = random_input(model, rng)
        expected = reference(model, inputs)
        got = HostRuntime(model, sanitize=True).invoke(inputs)
        assert all(differing(e, g) == 0 for e, g in zip(expected, got))




# --- LOGISTIC's exp against the host libm LiteRT calls --------------------------------------------------

EXPF_CHECK_C = r"""
/* logistic.c's lut_expf against this host's libm expf (what LiteRT's LUTPopulate calls) on a strided sample of
 * all float bit patterns: how often the two exps differ, and how often that changes a LOGISTIC table entry
 * round(256 / (1 + exp(-v))), printing every such v. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/logistic.c"

static int entry(float v, int use_libm) {
  const float e = use_libm ? expf(-v) : lut_expf(-v);
  return (int)roundf((1.0f / (1.0f + e)) * 256.0f);
}

int main(int argc, char **argv) {
  (void)argc;
  const unsigned stride = (unsigned)atoi(argv[1]);
  unsigned long long n = 0, exp_diff = 0, not_correctly_rounded = 0;
  for (unsigned long long u = 0; u <= 0xffffffffull; u += stride) {
    const unsigned bits = (unsigned)u;
    float x;
    memcpy(&x, &bits, 4);
    if (x != x) continue;
    ++n;
    const float mine = lut_expf(x), libm = expf(x), rounded = (float)exp((double)x);
    if (memcmp(&mine, &libm, 4)) ++exp_diff;
    if (memcmp(&mine, &rounded, 4)) ++not_correctly_rounded;
    if (entry(x, 0) != entry(x, 1)) printf("table_entry_differs %a\n", x);
  }
  volatile float known = 0x1.000016p-7f; /* found by the exhaustive run over all 2^32 floats; volatile: gcc
                                            would fold expf of a constant with MPFR, i.e. correctly rounded */
  printf("known_point %d %d\n", entry(known, 0), entry(known, 1));
  printf("checked %llu expf_differs %llu not_correctly_rounded %llu\n", n, exp_diff, not_correctly_rounded);
  return 0;
}
"""


def test_logistic_exp_matches_host_libm_in_the_table(tmp_path):
    """lut_expf is correctly rounded; glibc's expf (what LiteRT calls) is not always, yet both give the same
    LOGISTIC table entry for every float checked. The single float where they would not (found by an exhaustive
    run over all 2^32 floats: v = 0x1.000016p-7) is special-cased in lut_expf to glibc's value."""
    import shutil
    import subprocess

    if not shutil.which("gcc"):
        pytest.skip("needs gcc")
    runtime = Path(__file__).resolve().parents[2] / "firmware" / "runtime"
    (tmp_path / "check.c").write_text(EXPF_CHECK_C)
    exe = tmp_path / "check"
    subprocess.run(["gcc", "-std=c99", "-O2", "-ffp-contract=off", f"-I{runtime / 'include'}", f"-I{runtime / 'src'}",
                    "-o", str(exe), str(tmp_path / "check.c"), str(runtime / "src" / "ek_util.c"), "-lm"],
                   check=True, capture_output=True, timeout=120)
    out = subprocess.run([str(exe), "257"], check=True, capture_output=True, text=True, timeout=300).stdout
    tokens = out[out.index("checked "):].split()
    stats = dict(zip(tokens[0::2], map(int, tokens[1::2])))
    assert stats["checked"] > 16_000_000
    assert stats["not_correctly_rounded"] <= 1  # vs (float)exp(double); the one allowed is the special case
    assert "table_entry_differs" not in out, out
    known = out.split("known_point ")[1].split()[:2]
    assert known == ["128", "128"], out

# --- the same numbers on a Cortex-M4F ------------------------------------------------------------------

# Runs the float/double-dependent prepare() and eval() paths (LOGISTIC table from exp in software double,
# HARD_SWISH/MUL float multipliers, ADD/SOFTMAX/MEAN/QUANTIZE double multipliers, float QUANTIZE/DEQUANTIZE)
# over 600 seeded random configurations per op and prints one hash per op. Built for this host with gcc and
# for mps2-an386 (Cortex-M4F, single-precision FPU only) with arm-none-eabi-gcc, run in QEMU; the hashes must
# agree. The host side is the build the tests above hold to LiteRT BUILTIN_REF.
DEVICE_PARITY_C = r"""
/* Same numbers on the host and on Cortex-M: runs the float- and double-sensitive prepare()/eval() paths of the
 * ADD, MUL, SOFTMAX, LOGISTIC, HARD_SWISH, MEAN, QUANTIZE and DEQUANTIZE kernels over seeded random scales,
 * zero points and data, and prints one FNV-1a hash of every table, multiplier and output per op. */
#include <stdint.h>
#include <string.h>

#include "ek_kernels.h"

void out_str(const char *s); /* stdout on the host, semihosting on the board */

static uint32_t rng_state = 2463534242u;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return rng_state;
}
/* a random float in [2^emin, 2^(emax+1)) built from bits, so no libm is involved */
static float rnd_scale(int emin, int emax) {
  const uint32_t e = (uint32_t)(127 + emin + (int)(rnd() % (uint32_t)(emax - emin + 1)));
  const uint32_t bits = (e << 23) | (rnd() & 0x7fffffu);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}
static int32_t rnd_zp(void) { return (int32_t)(rnd() % 256u) - 128; }

static uint32_t hash;
static void mix(const void *p, size_t n) {
  const uint8_t *b = (const uint8_t *)p;
  for (size_t i = 0; i < n; ++i) { hash ^= b[i]; hash *= 16777619u; }
}
static void report(const char *name) {
  char line[48];
  size_t k = 0;
  while (name[k] && k < 32) { line[k] = name[k]; ++k; }
  line[k++] = ' ';
  for (int i = 7; i >= 0; --i) line[k++] = "0123456789abcdef"[(hash >> (4 * i)) & 15u];
  line[k++] = '\n';
  line[k] = 0;
  out_str(line);
  hash = 2166136261u;
}

static ek_tensor tensors[3];
static int8_t in_a[1024], in_b[1024], out8[2048];
static float in_f[1024], out_f[256];
static int32_t axes[2];
static uint64_t user_data[1024]; /* ADD keeps 2 x 256 int32 tables in its per-op data */

static void set1d(int i, int32_t type, void *data, int32_t n, float scale, int32_t zero_point) {
  ek_tensor *t = &tensors[i];
  memset(t, 0, sizeof *t);
  t->data = data;
  t->ndim = 1;
  t->dims[0] = n;
  t->type = type;
  t->bytes = n * (type == EK_FLOAT32 || type == EK_INT32 ? 4 : type == EK_INT16 ? 2 : 1);
  t->scale = scale;
  t->zero_point = zero_point;
  t->num_scales = scale > 0.0f ? 1 : 0;
}
static void reshape(int i, int32_t ndim, const int32_t *dims) {
  ek_tensor *t = &tensors[i];
  int32_t n = 1;
  t->ndim = ndim;
  for (int32_t d = 0; d < ndim; ++d) { t->dims[d] = dims[d]; n *= dims[d]; }
  t->bytes = n * (t->type == EK_INT16 ? 2 : 1);
}
static void run(const ek_kernel *k, int num_inputs, size_t out_bytes) {
  ek_context ctx;
  ek_op op;
  memset(&ctx, 0, sizeof ctx);
  memset(&op, 0, sizeof op);
  memset(user_data, 0, sizeof user_data);
  ctx.tensors = tensors;
  ctx.num_tensors = 3;
  op.opcode = k->opcode;
  op.num_inputs = num_inputs;
  op.num_outputs = 1;
  static int32_t op_inputs[EK_MAX_OP_INPUTS], op_outputs[1];
  for (int i = 0; i < num_inputs; ++i) op_inputs[i] = i;
  op_outputs[0] = num_inputs;
  op.inputs = op_inputs;
  op.outputs = op_outputs;
  op.params.beta = 1.0f;
  op.params.keep_dims = 1;
  op.params.activation = (int32_t)(rnd() % 4u); /* NONE, RELU, RELU_N1_TO_1, RELU6 */
  op.user_data = user_data;
  if (k->persistent_bytes(&ctx, &op) > sizeof user_data) {
    mix("persistent data too large", 25);
    return;
  }
  if (k->prepare(&ctx, &op) != EK_OK) {
    mix(ctx.error_message, strlen(ctx.error_message));
    return;
  }
  mix(user_data, k->persistent_bytes(&ctx, &op));
  k->eval(&ctx, &op);
  mix(out8 == tensors[num_inputs].data ? (const void *)out8 : (const void *)out_f, out_bytes);
}

int main(void) {
  hash = 2166136261u;
  for (int i = 0; i < 1024; ++i) { in_a[i] = (int8_t)rnd(); in_b[i] = (int8_t)rnd(); }
  for (int it = 0; it < 600; ++it) {
    const float s = rnd_scale(-12, 0);
    const int32_t z = rnd_zp();
    set1d(0, EK_INT8, in_a, 256, s, z);
    set1d(1, EK_INT8, out8, 256, 1.0f / 256, -128);
    run(&ek_kernel_logistic, 1, 256);
  }
  report("LOGISTIC");
  for (int it = 0; it < 600; ++it) {
    const float s = rnd_scale(-12, 1), ratio = rnd_scale(-6, 1);
    const int32_t z0 = rnd_zp(), z1 = rnd_zp();
    set1d(0, EK_INT8, in_a, 256, s, z0);
    set1d(1, EK_INT8, out8, 256, s * ratio, z1);
    run(&ek_kernel_hard_swish, 1, 256);
  }
  report("HARD_SWISH");
  for (int op = 0; op < 2; ++op) {
    for (int it = 0; it < 600; ++it) {
      const float s0 = rnd_scale(-12, 0), s1 = rnd_scale(-12, 0), s2 = rnd_scale(op ? -20 : -12, 0);
      const int32_t z0 = rnd_zp(), z1 = rnd_zp(), z2 = rnd_zp();
      const int32_t da[3] = {2, 10, 10}, db[2] = {1, 10}, dout[3] = {2, 10, 10};
      set1d(0, EK_INT8, in_a, 200, s0, z0);
      set1d(1, EK_INT8, in_b, 10, s1, z1);
      set1d(2, EK_INT8, out8, 200, s2, z2);
      reshape(0, 3, da);
      reshape(1, 2, db);
      reshape(2, 3, dout);
      run(op ? &ek_kernel_mul : &ek_kernel_add, 2, 200);
    }
    report(op ? "MUL" : "ADD");
  }
  for (int it = 0; it < 600; ++it) {
    const float s = rnd_scale(-12, 2);
    const int32_t z = rnd_zp(), dims[2] = {10, 25};
    const int wide = it % 2;
    set1d(0, EK_INT8, in_a, 250, s, z);
    set1d(1, wide ? EK_INT16 : EK_INT8, out8, 250, wide ? 1.0f / 32768 : 1.0f / 256, wide ? 0 : -128);
    reshape(0, 2, dims);
    reshape(1, 2, dims);
    run(&ek_kernel_softmax, 1, wide ? 500 : 250);
  }
  report("SOFTMAX");
  for (int it = 0; it < 600; ++it) {
    const float s = rnd_scale(-12, 0), ratio = rnd_scale(-3, 2);
    const int32_t z0 = rnd_zp(), z1 = rnd_zp(), in_dims[3] = {4, 6, 10};
    int32_t out_dims[3];
    axes[0] = (int32_t)(rnd() % 3u);
    axes[1] = (int32_t)(rnd() % 3u);
    for (int d = 0; d < 3; ++d) out_dims[d] = (d == axes[0] || d == axes[1]) ? 1 : in_dims[d];
    set1d(0, EK_INT8, in_a, 240, s, z0);
    set1d(1, EK_INT32, axes, 2, 0.0f, 0);
    tensors[1].is_constant = 1;
    set1d(2, EK_INT8, out8, 1, s * ratio, z1);
    reshape(0, 3, in_dims);
    reshape(2, 3, out_dims);
    run(&ek_kernel_mean, 2, (size_t)tensors[2].bytes);
  }
  report("MEAN");
  for (int it = 0; it < 600; ++it) {
    const float s = rnd_scale(-12, 0);
    const int32_t z = rnd_zp();
    const int to_uint8 = it % 3 == 0;
    for (int i = 0; i < 1024; ++i) {
      uint32_t bits = rnd(); /* any float (NaN, inf, subnormal), a quarter of them near 1, some near rounding ties */
      if (i % 4 == 0) bits = (bits & 0x807fffffu) | ((uint32_t)(120 + rnd() % 16u) << 23);
      memcpy(&in_f[i], &bits, 4);
      if (i % 7 == 0) in_f[i] = s * (float)((int32_t)(rnd() % 600u) - 300) * 0.5f;
    }
    set1d(0, EK_FLOAT32, in_f, 1024, 0.0f, 0);
    set1d(1, to_uint8 ? EK_UINT8 : EK_INT8, out8, 1024, s, to_uint8 ? z + 128 : z);
    run(&ek_kernel_quantize, 1, 1024);
  }
  report("QUANTIZE_FLOAT");
  for (int it = 0; it < 600; ++it) {
    const float s0 = rnd_scale(-12, 0), s1 = rnd_scale(-12, 0);
    const int32_t z0 = rnd_zp(), z1 = rnd_zp();
    set1d(0, EK_INT8, in_a, 256, s0, z0);
    set1d(1, EK_INT8, out8, 256, s1, z1);
    run(&ek_kernel_quantize, 1, 256);
  }
  report("QUANTIZE_INT8");
  for (int it = 0; it < 600; ++it) {
    const float s = rnd_scale(-40, 20);
    const int32_t z = rnd_zp();
    set1d(0, EK_INT8, in_a, 256, s, z);
    set1d(1, EK_FLOAT32, out_f, 256, 0.0f, 0);
    run(&ek_kernel_dequantize, 1, 1024);
  }
  report("DEQUANTIZE");
  return 0;
}
"""

DEVICE_STARTUP_C = r"""
#include <stdint.h>
#include <string.h>
extern int main(void);
extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
static int semihost(int op, void *arg) { register int r0 __asm__("r0") = op; register void *r1 __asm__("r1") = arg; __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory"); return r0; }
void out_str(const char *s) { semihost(0x04, (void *)s); }
void Reset_Handler(void) {
  uint32_t *src = &_sidata, *dst = &_sdata; while (dst < &_edata) *dst++ = *src++;
  for (dst = &_sbss; dst < &_ebss;) *dst++ = 0;
  *(volatile uint32_t *)0xE000ED88 |= (0xFu << 20); __asm__ volatile("dsb\n isb");
  main();
  uint32_t args[2] = {0x20026, 0}; semihost(0x20, args); /* SYS_EXIT_EXTENDED ADP_Stopped_ApplicationExit */
  for (;;) {}
}
void Default_Handler(void) { out_str("FAULT\n"); uint32_t args[2] = {0x20026, 1}; semihost(0x20, args); for (;;) {} }
__attribute__((section(".vectors"), used)) const void *vectors[16] = { &_estack, Reset_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler };
/* newlib nano pieces the kernels do not need */
void *_sbrk(int n) { (void)n; return (void *)-1; }
"""

DEVICE_LINKER_SCRIPT = """
MEMORY { FLASH (rx) : ORIGIN = 0x00000000, LENGTH = 4M  RAM (rwx) : ORIGIN = 0x20000000, LENGTH = 4M }
SECTIONS {
  .vectors : { KEEP(*(.vectors)) } > FLASH
  .text : { *(.text*) *(.rodata*) } > FLASH
  .ARM.exidx : { *(.ARM.exidx*) } > FLASH
  _sidata = LOADADDR(.data);
  .data : { _sdata = .; *(.data*) . = ALIGN(4); _edata = .; } > RAM AT > FLASH
  .bss : { _sbss = .; *(.bss*) *(COMMON) . = ALIGN(4); _ebss = .; } > RAM
  _estack = ORIGIN(RAM) + LENGTH(RAM);
}
"""

HOST_MAIN_C = "#include <stdio.h>\nvoid out_str(const char *s) { fputs(s, stdout); }\n"
PARITY_KERNELS = ["add", "mul", "softmax", "logistic", "hard_swish", "mean", "quantize", "dequantize"]


def test_float_paths_give_the_same_bits_on_cortex_m4_in_qemu(tmp_path):
    import shutil
    import subprocess

    missing = [tool for tool in ("gcc", "arm-none-eabi-gcc", "qemu-system-arm") if not shutil.which(tool)]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (apt-get install gcc gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm)")
    runtime = Path(__file__).resolve().parents[2] / "firmware" / "runtime"
    sources = [str(runtime / "src" / "kernels" / f"{k}.c") for k in PARITY_KERNELS] + [str(runtime / "src" / "ek_util.c")]
    includes = [f"-I{runtime / 'include'}", f"-I{runtime / 'src'}"]
    for name, text in (("parity.c", DEVICE_PARITY_C), ("startup.c", DEVICE_STARTUP_C), ("board.ld", DEVICE_LINKER_SCRIPT),
                       ("host_main.c", HOST_MAIN_C)):
        (tmp_path / name).write_text(text)
    common = ["-std=c99", "-O2", "-ffp-contract=off", *includes]
    subprocess.run(["gcc", *common, "-o", str(tmp_path / "host"), str(tmp_path / "parity.c"), str(tmp_path / "host_main.c"),
                    *sources, "-lm"], check=True, capture_output=True, timeout=120)
    subprocess.run(["arm-none-eabi-gcc", *common, "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16",
                    "-nostartfiles", "-T", str(tmp_path / "board.ld"), "--specs=nano.specs", "-o", str(tmp_path / "m4.elf"),
                    str(tmp_path / "parity.c"), str(tmp_path / "startup.c"), *sources, "-lm", "-lc", "-lgcc"],
                   check=True, capture_output=True, timeout=120)
    host = subprocess.run([str(tmp_path / "host")], check=True, capture_output=True, text=True, timeout=60).stdout
    board = subprocess.run(["qemu-system-arm", "-M", "mps2-an386", "-nographic", "-semihosting-config",
                            "enable=on,target=native", "-kernel", str(tmp_path / "m4.elf")],
                           capture_output=True, text=True, timeout=120)
    lines = [line for line in (board.stdout + board.stderr).splitlines() if line.strip()]
    assert board.returncode == 0, board.stdout + board.stderr
    assert len(host.splitlines()) == 9
    assert lines == host.splitlines()

# --- a real converter graph ----------------------------------------------------------------------------

@pytest.fixture(scope="session")
def mobilenet_like_int8(tmp_path_factory) -> bytes:
    """tests.firmware.mobilenet_like through `edgekit quantize` (litert-torch path), converted once."""
    from edgekit.quantize import QuantizeOptions, quantize
    from tests.firmware.mobilenet_like import calibration_images

    work = tmp_path_factory.mktemp("mobilenet_like")
    calib = work / "calib.npy"
    np.save(calib, calibration_images(100))
    result = quantize("tests.firmware.mobilenet_like:mobilenet_like", calib, work / "out", QuantizeOptions())
    assert result.parity.passed
    return (work / "out" / "model_int8.tflite").read_bytes()


@pytest.mark.slow
def test_mobilenet_like_from_pytorch_is_bit_exact(mobilenet_like_int8):
    from edgekit.firmware.host_runtime import op_codes, op_name

    model = mobilenet_like_int8
    ops = {op_name(c) for c in op_codes(model)}
    assert {"TRANSPOSE", "PAD", "HARD_SWISH", "ADD", "MEAN", "DEPTHWISE_CONV_2D"} <= ops, ops
    rng = np.random.default_rng(16)
    rt = HostRuntime(model)
    for _ in range(4):
        inputs = random_input(model, rng)
        expected = reference(model, inputs)
        got = rt.invoke(inputs)
        assert differing(expected[0], got[0]) == 0
