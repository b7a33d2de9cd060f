"""Reduction kernels of the edgekit C runtime, bit for bit: SUM, REDUCE_MAX, REDUCE_MIN (kernels/mean.c, sharing
MEAN's axes / keep_dims handling), ARG_MAX, ARG_MIN (kernels/arg_min_max.c).

REDUCE_MAX/MIN and ARG_MAX/MIN are checked against LiteRT BUILTIN_REF. SUM is not: LiteRT's reference int8 SUM
(reduce.cc EvalSum, kReference) reads the int8 data as uint8 (shown by test_builtin_ref_int8_sum_reads_int8_as_uint8
below), so SUM is checked against the TFLite Micro python interpreter (reduce_common.cc EvalSumHelper; LiteRT's
default resolver runs XNNPACK and differs from both by 1 LSB at times). Seeded random shapes, axes (negative spellings, duplicates), keep_dims, scales and zero points,
through the host runtime (in-place .tflite path and a prepared model with the overlapped plan).
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np
import pytest

from edgekit.errors import EdgekitError
from edgekit.firmware.host_runtime import HostRuntime
from tests.firmware.opmodels import T, build_model, random_input
from tests.firmware.test_kernels_elementwise import (PREPARED_MODES, assert_bit_exact, const_i32, differing,
                                                     log_uniform, random_dims, zp)


def random_axes(rng: np.random.Generator, rank: int, max_axes: int):
    n_axes = int(rng.integers(1, min(rank, max_axes) + 1))
    axes = [int(a) for a in rng.choice(rank, size=n_axes, replace=False)]
    axes = [a - rank if rng.random() < 0.3 else a for a in axes]  # negative spellings
    if rng.random() < 0.2:
        axes.append(axes[0])  # a duplicate
    return axes


def reduced_shape(shape: Sequence[int], axes: Sequence[int], keep: bool) -> List[int]:
    rank = len(shape)
    resolved = {a % rank for a in axes}
    return [1 if d in resolved else s for d, s in enumerate(shape)] if keep else \
        [s for d, s in enumerate(shape) if d not in resolved]


def tflm_outputs(model: bytes, inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
    from tflite_micro import runtime

    interp = runtime.Interpreter.from_bytes(model, arena_size=1 << 20)
    for i, x in enumerate(inputs):
        interp.set_input(x, i)
    interp.invoke()
    return [interp.get_output(0)]  # the models here have one output


def assert_matches_tflm(model: bytes, inputs: Sequence[np.ndarray], what: str) -> None:
    expected = tflm_outputs(model, inputs)
    for optimize in (None, next(PREPARED_MODES)):
        got = HostRuntime(model, optimize=optimize).invoke(inputs)
        for i, (e, g) in enumerate(zip(expected, got)):
            n = differing(e.reshape(g.shape), g)
            assert n == 0, f"{what} (optimize={optimize}): output {i}: {n} of {e.size} elements differ from TFLite Micro"


# --- SUM ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(30))
def test_sum_random_axes_against_tflm(seed):
    rng = np.random.default_rng(7000 + seed)
    rank = int(rng.integers(1, 6))  # TFLM: at most 5 dimensions and 2 reduced axes
    shape = random_dims(rng, rank, 3000, max_dim=9)
    axes = random_axes(rng, rank, 2)
    if len({a % rank for a in axes}) < len(axes):
        axes = axes[:-1]  # TFLM counts a duplicate as a third axis
    keep = bool(seed % 2)
    in_scale = log_uniform(rng, 1e-3, 1.0)
    out_scale = in_scale * log_uniform(rng, 0.5, 60.0)  # sums grow: larger output scales
    model = build_model("SUM", [T(shape, scale=in_scale, zero_point=zp(rng)), const_i32(axes)],
                        [T(reduced_shape(shape, axes, keep), scale=out_scale, zero_point=zp(rng))], {"keep_dims": keep})
    assert_matches_tflm(model, random_input(model, np.random.default_rng(seed)), f"SUM {shape} axes {axes} keep {keep}")


def test_builtin_ref_int8_sum_reads_int8_as_uint8():
    """Why SUM's oracle is TFLM: BUILTIN_REF's int8 SUM treats -100 as 156 (a LiteRT reference-kernel bug)."""
    from tests.firmware.opmodels import reference

    model = build_model("SUM", [T([1, 2], scale=0.1, zero_point=0), const_i32([1])], [T([1], scale=1.0, zero_point=0)])
    x = np.array([[-100, -100]], np.int8)
    assert reference(model, [x])[0].tolist() == [31]  # (156 + 156) * 0.1 = 31.2; the real sum is -20
    assert tflm_outputs(model, [x])[0].tolist() == [-20]
    assert HostRuntime(model).invoke([x])[0].tolist() == [-20]


# --- REDUCE_MAX / REDUCE_MIN -------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize("seed", range(16))
def test_reduce_max_min_random_axes(op, seed):
    rng = np.random.default_rng(7100 + seed)
    rank = int(rng.integers(1, 7))
    shape = random_dims(rng, rank, 3000, max_dim=9)
    axes = random_axes(rng, rank, rank)
    keep = bool(seed % 2)
    scale, z = log_uniform(rng, 1e-3, 1.0), zp(rng)
    model = build_model(op, [T(shape, scale=scale, zero_point=z), const_i32(axes)],
                        [T(reduced_shape(shape, axes, keep), scale=scale, zero_point=z)], {"keep_dims": keep})
    assert_bit_exact(model, random_input(model, rng), f"{op} {shape} axes {axes} keep {keep}")


# --- ARG_MAX / ARG_MIN -------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
@pytest.mark.parametrize("seed", range(16))
def test_arg_max_min_random(op, seed):
    rng = np.random.default_rng(7200 + seed)
    rank = int(rng.integers(1, 7))
    shape = random_dims(rng, rank, 3000, max_dim=9)
    axis = int(rng.integers(-rank, rank))
    out_type = "int64" if seed % 3 == 0 else "int32"
    axis_t = T([1], dtype="int64" if seed % 2 else "int32", scale=None,
               data=np.array([axis], np.int64 if seed % 2 else np.int32))
    out_shape = [s for d, s in enumerate(shape) if d != axis % rank]
    model = build_model(op, [T(shape, scale=0.05, zero_point=-3), axis_t], [T(out_shape, out_type, scale=None)],
                        {"output_type": 4 if out_type == "int64" else 2})
    x = random_input(model, rng)
    if seed % 2 == 0:  # many ties: the first index must win
        x[0] = (x[0] // 64).astype(x[0].dtype)
    assert_bit_exact(model, x, f"{op} {shape} axis {axis} -> {out_type}")


BAD_MODELS = {
    "REDUCE_MAX with a different output scale": (
        lambda: build_model("REDUCE_MAX", [T([2, 3], scale=0.1), const_i32([1])], [T([2], scale=0.2)]),
        "REDUCE_MAX needs the same scale and zero point"),
    "SUM output of the wrong shape": (
        lambda: build_model("SUM", [T([2, 3]), const_i32([1])], [T([3])]), "SUM output shape does not match"),
    "ARG_MAX with an int8 output": (
        lambda: build_model("ARG_MAX", [T([2, 3]), const_i32([1])], [T([2])]), "ARG_MAX output must be int32 or int64"),
    "ARG_MIN axis out of range": (
        lambda: build_model("ARG_MIN", [T([2, 3]), const_i32([2])], [T([2], "int32", scale=None)]),
        "ARG_MIN axis out of range"),
}


@pytest.mark.parametrize("name", sorted(BAD_MODELS))
def test_prepare_rejects_inconsistent_models(name):
    build, message = BAD_MODELS[name]
    with pytest.raises(EdgekitError, match=message):
        HostRuntime(build())


def test_support_check_accepts_int32_arg_max_outputs_and_names_a_wrong_one():
    from edgekit.firmware.support import check_support
    from edgekit.tflite_graph import read_graph

    ok = build_model("ARG_MAX", [T([2, 3]), const_i32([1])], [T([2], "int32", scale=None)], {"output_type": 2})
    assert check_support(read_graph(ok)).ok
    bad = check_support(read_graph(build_model("ARG_MIN", [T([2, 3]), const_i32([1])], [T([2])])))
    assert "output 't2' is INT8 (ARG_MIN produces INT32 or INT64)" in bad.rejected[0].reason
