"""Binary elementwise kernels of the edgekit C runtime against LiteRT BUILTIN_REF, bit for bit.

SUB (kernels/add.c), SQUARED_DIFFERENCE, MAXIMUM, MINIMUM, EQUAL ... GREATER_EQUAL, LOGICAL_AND/OR (kernels/binary.c),
SELECT, SELECT_V2 (kernels/select.c): seeded random shapes, broadcasts (up to the rank TFLite's reference
broadcasts: 4-D for SUB/SQUARED_DIFFERENCE/comparisons/SELECT_V2, 5-D for MAXIMUM/MINIMUM; same-shape operands of
any rank up to 6), scales, zero points and activations, through the host build of the runtime (in-place .tflite
path and a prepared model with the overlapped plan) and LiteRT with OpResolverType.BUILTIN_REF. Every comparison
demands 0 differing elements.
"""
from __future__ import annotations

import numpy as np
import pytest

from edgekit.errors import EdgekitError
from edgekit.firmware.host_runtime import HostRuntime
from tests.firmware.opmodels import T, build_model, random_input
from tests.firmware.test_kernels_elementwise import (ACTIVATIONS, all_pairs_inputs, assert_bit_exact, log_uniform,
                                                     random_dims, zp)

COMPARISONS = ["EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"]


def broadcast_shapes(rng: np.random.Generator, max_rank: int):
    """Two shapes that broadcast (NumPy rules, ranks 0..max_rank) and their broadcast shape."""
    rank = int(rng.integers(0, max_rank + 1))
    base = random_dims(rng, rank, 1500, max_dim=5)
    shapes = []
    for _ in range(2):
        r = int(rng.integers(0, rank + 1))
        shapes.append([1 if rng.random() < 0.35 else d for d in base[rank - r:]])
    if rng.random() < 0.5 and rank:
        shapes[int(rng.integers(0, 2))] = list(base)
    return shapes[0], shapes[1], list(np.broadcast_shapes(tuple(shapes[0]), tuple(shapes[1])))


def same_shapes(rng: np.random.Generator):
    """Equal shapes of rank 0..6 (no broadcasting: TFLite runs these flat at any rank)."""
    dims = random_dims(rng, int(rng.integers(0, 7)), 1500, max_dim=5)
    return list(dims), list(dims), list(dims)


def shapes_for(rng: np.random.Generator, seed: int, max_rank: int):
    return same_shapes(rng) if seed % 4 == 3 else broadcast_shapes(rng, max_rank)


# --- SUB -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(32))
def test_sub_broadcast_random(seed):
    rng = np.random.default_rng(4100 + seed)
    s1, s2, so = shapes_for(rng, seed, 4)
    sc1, sc2 = log_uniform(rng, 1e-3, 1.0), log_uniform(rng, 1e-3, 1.0)
    out_scale = max(sc1, sc2) * log_uniform(rng, 0.3, 4.0)
    act = ACTIVATIONS[seed % 4]
    model = build_model("SUB", [T(s1, scale=sc1, zero_point=zp(rng)), T(s2, scale=sc2, zero_point=zp(rng))],
                        [T(so, scale=out_scale, zero_point=zp(rng))], {"fused_activation_function": act})
    assert_bit_exact(model, random_input(model, rng), f"SUB {s1}-{s2}->{so} {act}")


# output / larger input scale: shifts 0 (slow path), 1..22 (table fast path), 23+ (slow path); equal input scales
SUB_SCALE_CASES = [(0.02, 0.02, 2.0 ** -18.5), (0.05, 0.011, 2.0 ** -10), (0.011, 0.05, 0.3), (0.05, 0.05, 1.0),
                   (0.03, 0.007, 3.7), (0.004, 0.09, 2.0 ** 4)]


@pytest.mark.parametrize("case", range(len(SUB_SCALE_CASES)))
def test_sub_every_input_pair(case):
    sc1, sc2, ratio = SUB_SCALE_CASES[case]
    out_scale = max(sc1, sc2) * ratio
    for act in ("NONE", "RELU6"):
        model = build_model("SUB", [T([256, 256], scale=sc1, zero_point=-5), T([256, 256], scale=sc2, zero_point=17)],
                            [T([256, 256], scale=out_scale, zero_point=3)], {"fused_activation_function": act})
        assert_bit_exact(model, all_pairs_inputs(), f"SUB all pairs {SUB_SCALE_CASES[case]} {act}")


def test_sub_with_constant_operand():
    rng = np.random.default_rng(5)
    for shape_b in ([1, 6, 5, 16], [16], []):
        const = rng.integers(-128, 128, size=shape_b, dtype=np.int8)
        model = build_model("SUB", [T([1, 6, 5, 16], scale=0.05, zero_point=-3),
                                    T(shape_b, scale=0.02, zero_point=9, data=const)],
                            [T([1, 6, 5, 16], scale=0.07, zero_point=1)])
        assert_bit_exact(model, random_input(model, rng), f"SUB constant {shape_b}")
        model = build_model("SUB", [T(shape_b, scale=0.02, zero_point=9, data=const),
                                    T([1, 6, 5, 16], scale=0.05, zero_point=-3)],
                            [T([1, 6, 5, 16], scale=0.07, zero_point=1)])
        assert_bit_exact(model, random_input(model, rng), f"constant {shape_b} SUB")


# --- SQUARED_DIFFERENCE / MAXIMUM / MINIMUM ------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(24))
def test_squared_difference_random(seed):
    rng = np.random.default_rng(4200 + seed)
    s1, s2, so = shapes_for(rng, seed, 4)
    sc1, sc2 = log_uniform(rng, 1e-3, 1.0), log_uniform(rng, 1e-3, 1.0)
    out_scale = max(sc1, sc2) ** 2 * log_uniform(rng, 1.0, 300.0)
    model = build_model("SQUARED_DIFFERENCE", [T(s1, scale=sc1, zero_point=zp(rng)), T(s2, scale=sc2, zero_point=zp(rng))],
                        [T(so, scale=out_scale, zero_point=zp(rng))])
    assert_bit_exact(model, random_input(model, rng), f"SQUARED_DIFFERENCE {s1},{s2}->{so}")


@pytest.mark.parametrize("ratio", [4.0, 60.0, 900.0])
def test_squared_difference_every_input_pair(ratio):
    sc1, sc2 = 0.03, 0.011
    model = build_model("SQUARED_DIFFERENCE", [T([256, 256], scale=sc1, zero_point=-9), T([256, 256], scale=sc2, zero_point=40)],
                        [T([256, 256], scale=sc1 * sc1 * ratio, zero_point=-128)])
    assert_bit_exact(model, all_pairs_inputs(), f"SQUARED_DIFFERENCE all pairs x{ratio}")


@pytest.mark.parametrize("op", ["MAXIMUM", "MINIMUM"])
@pytest.mark.parametrize("seed", range(12))
def test_maximum_minimum_random(op, seed):
    rng = np.random.default_rng(4300 + seed)
    s1, s2, so = shapes_for(rng, seed, 5)
    scale, z = log_uniform(rng, 1e-3, 1.0), zp(rng)
    model = build_model(op, [T(s1, scale=scale, zero_point=z), T(s2, scale=scale, zero_point=z)],
                        [T(so, scale=scale, zero_point=z)])
    assert_bit_exact(model, random_input(model, rng), f"{op} {s1},{s2}->{so}")


# --- comparisons, logical ------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", COMPARISONS)
@pytest.mark.parametrize("seed", range(8))
def test_comparison_random(op, seed):
    rng = np.random.default_rng(4400 + 10 * seed + COMPARISONS.index(op))
    s1, s2, so = shapes_for(rng, seed, 4)
    # nearby and equal scales and zero points make the rescaled values collide (EQUAL true for different raw values)
    sc1 = log_uniform(rng, 1e-3, 0.9)
    sc2 = sc1 if seed % 3 == 0 else sc1 * log_uniform(rng, 0.5, 2.0)
    z1 = zp(rng)
    z2 = z1 if seed % 2 == 0 else zp(rng)
    model = build_model(op, [T(s1, scale=sc1, zero_point=z1), T(s2, scale=min(sc2, 0.95), zero_point=z2)],
                        [T(so, dtype="bool", scale=None)])
    x = random_input(model, rng)
    if seed % 2 == 0 and x[0].size and x[1].size:  # make equal raw values common
        x[1] = np.broadcast_to(x[0].reshape(-1)[0], x[1].shape).copy() if rng.random() < 0.3 else x[1]
    assert_bit_exact(model, x, f"{op} {s1},{s2}->{so}")


@pytest.mark.parametrize("op", COMPARISONS)
def test_comparison_every_input_pair(op):
    for sc1, sc2, z1, z2 in ((0.02, 0.02, 3, 3), (0.004, 0.0031, -20, 7), (0.5, 0.07, 0, -128)):
        model = build_model(op, [T([256, 256], scale=sc1, zero_point=z1), T([256, 256], scale=sc2, zero_point=z2)],
                            [T([256, 256], dtype="bool", scale=None)])
        assert_bit_exact(model, all_pairs_inputs(), f"{op} all pairs {sc1} {sc2}")


@pytest.mark.parametrize("op", ["LOGICAL_AND", "LOGICAL_OR"])
@pytest.mark.parametrize("seed", range(6))
def test_logical_random(op, seed):
    rng = np.random.default_rng(4500 + seed)
    s1, s2, so = shapes_for(rng, seed, 4)
    model = build_model(op, [T(s1, dtype="bool", scale=None), T(s2, dtype="bool", scale=None)],
                        [T(so, dtype="bool", scale=None)])
    assert_bit_exact(model, random_input(model, rng), f"{op} {s1},{s2}->{so}")


# --- rejections ---------------------------------------------------------------------------------------------

BAD_MODELS = {
    "comparison with an int8 output": (
        lambda: build_model("LESS", [T([4]), T([4])], [T([4])]), "comparison output must be bool"),
    "SUB with a bool input": (
        lambda: build_model("SUB", [T([4], dtype="bool", scale=None), T([4])], [T([4])]),
        "SUB supports int8 inputs and output only"),
    "MAXIMUM shapes that do not broadcast": (
        lambda: build_model("MAXIMUM", [T([3, 4]), T([2, 4])], [T([3, 4])]), "MAXIMUM input shapes do not broadcast"),
    "comparison input scale of 1 or more": (
        lambda: build_model("GREATER", [T([4], scale=1.5), T([4])], [T([4], dtype="bool", scale=None)]),
        "input scale must be below 1"),
    "EQUAL on int16 (LiteRT's reference is not the raw comparison: no oracle)": (
        lambda: build_model("EQUAL", [T([4], "int16"), T([4], "int16")], [T([4], dtype="bool", scale=None)]),
        "EQUAL / NOT_EQUAL on int16 are not supported"),
    "SUB int16 with power-of-two scales (TFLite's POT path)": (
        lambda: build_model("SUB", [T([4], "int16", scale=2.0 ** -10), T([4], "int16", scale=2.0 ** -9)],
                            [T([4], "int16", scale=2.0 ** -8)]), "power-of-two scales"),
    "LOGICAL_AND on int8": (
        lambda: build_model("LOGICAL_AND", [T([4]), T([4])], [T([4], dtype="bool", scale=None)]),
        "LOGICAL_AND needs bool inputs and a bool output"),
}



# --- SELECT / SELECT_V2 -------------------------------------------------------------------------------------

def three_way_shapes(rng: np.random.Generator, max_rank: int = 4):
    """Condition, x, y shapes that broadcast together (NumPy rules) and the output shape."""
    rank = int(rng.integers(0, max_rank + 1))
    base = random_dims(rng, rank, 1200, max_dim=5)
    shapes = []
    for _ in range(3):
        r = int(rng.integers(0, rank + 1))
        shapes.append([1 if rng.random() < 0.35 else d for d in base[rank - r:]])
    if rng.random() < 0.5 and rank:
        shapes[int(rng.integers(0, 3))] = list(base)
    return shapes + [list(np.broadcast_shapes(*(tuple(s) for s in shapes)))]


@pytest.mark.parametrize("seed", range(24))
def test_select_v2_broadcast_random(seed):
    rng = np.random.default_rng(4600 + seed)
    sc, sx, sy, so = three_way_shapes(rng) if seed % 4 != 3 else [random_dims(rng, int(rng.integers(0, 7)), 1200, 5)] * 4
    dtype = "int16" if seed % 5 == 4 else "int8"
    model = build_model("SELECT_V2", [T(sc, dtype="bool", scale=None), T(sx, dtype, scale=0.05, zero_point=0),
                                      T(sy, dtype, scale=0.05, zero_point=0)], [T(so, dtype, scale=0.05, zero_point=0)])
    assert_bit_exact(model, random_input(model, rng), f"SELECT_V2 {sc},{sx},{sy}->{so} {dtype}")


@pytest.mark.parametrize("seed", range(12))
def test_select_same_shape_scalar_and_rank_one_condition(seed):
    rng = np.random.default_rng(4700 + seed)
    shape = random_dims(rng, int(rng.integers(1, 6)), 1200, 5)
    cond = [shape, [], [shape[0]]][seed % 3]
    dtype = "int16" if seed % 4 == 3 else "int8"
    model = build_model("SELECT", [T(cond, dtype="bool", scale=None), T(shape, dtype, scale=0.1, zero_point=2),
                                   T(shape, dtype, scale=0.1, zero_point=2)], [T(shape, dtype, scale=0.1, zero_point=2)])
    assert_bit_exact(model, random_input(model, rng), f"SELECT {cond} {shape} {dtype}")


def test_select_with_a_constant_operand():
    rng = np.random.default_rng(3)
    const = rng.integers(-128, 128, size=[1, 8], dtype=np.int8)
    model = build_model("SELECT_V2", [T([5, 1], dtype="bool", scale=None), T([5, 8], scale=0.1, zero_point=0),
                                      T([1, 8], scale=0.1, zero_point=0, data=const)], [T([5, 8], scale=0.1, zero_point=0)])
    assert_bit_exact(model, random_input(model, rng), "SELECT_V2 constant y")


BAD_MODELS.update({
    "SELECT with an int8 condition": (
        lambda: build_model("SELECT", [T([4]), T([4]), T([4])], [T([4])]), "SELECT condition must be bool"),
    "SELECT with a rank-1 condition not of x's first dimension": (
        lambda: build_model("SELECT", [T([3], dtype="bool", scale=None), T([2, 3]), T([2, 3])], [T([2, 3])]),
        "SELECT condition must have x's shape"),
    "SELECT_V2 shapes that do not broadcast": (
        lambda: build_model("SELECT_V2", [T([3], dtype="bool", scale=None), T([2, 4]), T([2, 4])], [T([2, 4])]),
        "SELECT_V2 input shapes do not broadcast"),
})


# --- int16 (16x8 models): MAXIMUM / MINIMUM and comparisons on raw int16 values -------------------------------

INT16_OPS = ["MAXIMUM", "MINIMUM", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"]


@pytest.mark.parametrize("op", INT16_OPS)
@pytest.mark.parametrize("seed", range(4))
def test_int16_maximum_minimum_and_comparisons(op, seed):
    rng = np.random.default_rng(4900 + 10 * seed + INT16_OPS.index(op))
    s1, s2, so = shapes_for(rng, seed, 4)
    sc1, sc2 = log_uniform(rng, 1e-4, 0.01), log_uniform(rng, 1e-4, 0.01)
    if op in ("MAXIMUM", "MINIMUM"):
        sc2 = sc1
    out = T(so, "int16", scale=sc1, zero_point=0) if op in ("MAXIMUM", "MINIMUM") else T(so, dtype="bool", scale=None)
    model = build_model(op, [T(s1, "int16", scale=sc1, zero_point=0), T(s2, "int16", scale=sc2, zero_point=0)], [out])
    x = random_input(model, rng)
    if seed % 2 == 0:  # narrow values: many equal pairs
        x = [(v // 8192).astype(np.int16) for v in x]
    assert_bit_exact(model, x, f"{op} int16 {s1},{s2}->{so}")


@pytest.mark.parametrize("op", ["SUB", "ADD"])
@pytest.mark.parametrize("seed", range(10))
def test_int16_sub_and_add_general_scales(op, seed):
    """The general int16 path (left_shift 15) of sub.cc / add.cc (int16 zero points are 0: TFLite requires it)."""
    rng = np.random.default_rng(5000 + seed + (100 if op == "ADD" else 0))
    s1, s2, so = shapes_for(rng, seed, 4)
    sc1, sc2 = log_uniform(rng, 1e-5, 1e-2), log_uniform(rng, 1e-5, 1e-2)
    out_scale = max(sc1, sc2) * log_uniform(rng, 0.5, 3.0)
    act = ACTIVATIONS[seed % 4]
    model = build_model(op, [T(s1, "int16", scale=sc1, zero_point=0), T(s2, "int16", scale=sc2, zero_point=0)],
                        [T(so, "int16", scale=out_scale, zero_point=0)], {"fused_activation_function": act})
    assert_bit_exact(model, random_input(model, rng), f"{op} int16 {s1},{s2}->{so} {act}")


@pytest.mark.parametrize("name", sorted(BAD_MODELS))
def test_prepare_rejects_inconsistent_models(name):
    build, message = BAD_MODELS[name]
    with pytest.raises(EdgekitError, match=message):
        HostRuntime(build())


def test_support_check_knows_the_bool_tensors_of_comparisons_select_and_logical_ops():
    from edgekit.firmware.support import check_support
    from edgekit.tflite_graph import read_graph

    good = [build_model("LESS", [T([4]), T([4])], [T([4], dtype="bool", scale=None)]),
            build_model("SELECT_V2", [T([4], dtype="bool", scale=None), T([4]), T([4])], [T([4])]),
            build_model("LOGICAL_OR", [T([4], dtype="bool", scale=None)] * 2, [T([4], dtype="bool", scale=None)])]
    for model in good:
        report = check_support(read_graph(model))
        assert report.ok, [o.describe() for o in report.rejected]
    report = check_support(read_graph(build_model("GREATER", [T([4]), T([4])], [T([4])])))
    assert not report.ok and "output 't2' is INT8 (GREATER produces BOOL)" in report.rejected[0].reason
    assert "int8-only" not in report.rejected[0].reason
    report = check_support(read_graph(build_model("SELECT", [T([4]), T([4]), T([4])], [T([4])])))
    assert "input 0 't0' is INT8 (SELECT takes BOOL)" in report.rejected[0].reason
    report = check_support(read_graph(build_model("SUB", [T([4], "float32", scale=None)] * 2, [T([4], "float32", scale=None)])))
    assert "FLOAT32 tensor(s)" in report.rejected[0].reason and "int8-only" in report.rejected[0].reason


# --- DIV ----------------------------------------------------------------------------------------------------

def nonzero_divisor(x: np.ndarray, zero_point: int) -> np.ndarray:
    """LiteRT refuses (at invoke) a divisor equal to its zero point (a real 0); move those one step up."""
    return np.where(x == zero_point, zero_point + (1 if zero_point < 127 else -1), x).astype(x.dtype)


@pytest.mark.parametrize("seed", range(24))
def test_div_broadcast_random(seed):
    rng = np.random.default_rng(4800 + seed)
    s1, s2, so = shapes_for(rng, seed, 5)
    sc1, sc2 = log_uniform(rng, 1e-3, 1.0), log_uniform(rng, 1e-3, 1.0)
    out_scale = sc1 / sc2 * log_uniform(rng, 0.002, 2.0)
    act = ACTIVATIONS[seed % 4]
    z2 = zp(rng)
    model = build_model("DIV", [T(s1, scale=sc1, zero_point=zp(rng)), T(s2, scale=sc2, zero_point=z2)],
                        [T(so, scale=out_scale, zero_point=zp(rng))], {"fused_activation_function": act})
    x = random_input(model, rng)
    assert_bit_exact(model, [x[0], nonzero_divisor(x[1], z2)], f"DIV {s1}/{s2}->{so} {act}")


@pytest.mark.parametrize("case", [(0.05, 0.05, 0.05, 3, -7), (0.02, 0.1, 0.004, -128, 0), (0.3, 0.01, 2.5, 10, 127),
                                  (0.01, 0.2, 0.0005, 0, -20)])
def test_div_every_input_pair(case):
    """Every (dividend, divisor) int8 pair except a divisor at its zero point (a real 0: LiteRT refuses it)."""
    sc1, sc2, so, z1, z2 = case
    x, y = all_pairs_inputs()
    keep = y[0] != z2
    x, y = x[:, keep], y[:, keep]
    model = build_model("DIV", [T(list(x.shape), scale=sc1, zero_point=z1), T(list(y.shape), scale=sc2, zero_point=z2)],
                        [T(list(x.shape), scale=so, zero_point=1)])
    assert_bit_exact(model, [np.ascontiguousarray(x), np.ascontiguousarray(y)], f"DIV all pairs {case}")
