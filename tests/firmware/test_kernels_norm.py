"""L2_NORMALIZATION (kernels/l2norm.c) and BATCH_MATMUL (kernels/batch_matmul.c) of the edgekit C runtime against
LiteRT BUILTIN_REF, bit for bit: seeded random shapes, scales and zero points through the host runtime (in-place
.tflite path and a prepared model with the overlapped plan)."""
from __future__ import annotations

import numpy as np
import pytest

from edgekit.errors import EdgekitError
from edgekit.firmware.host_runtime import HostRuntime
from tests.firmware.opmodels import T, build_model, random_input
from tests.firmware.test_kernels_elementwise import assert_bit_exact, log_uniform, random_dims, zp


@pytest.mark.parametrize("seed", range(24))
def test_l2_normalization_random(seed):
    rng = np.random.default_rng(8000 + seed)
    shape = random_dims(rng, int(rng.integers(1, 5)), 3000, max_dim=40 if seed % 3 == 0 else 9)
    model = build_model("L2_NORMALIZATION", [T(shape, scale=log_uniform(rng, 1e-3, 1.0), zero_point=zp(rng))],
                        [T(shape, scale=1 / 128, zero_point=0)])
    x = random_input(model, rng)
    if seed % 4 == 1:  # rows near the zero point: sums of 0, 1 and small values (the inverse square root's edges)
        x[0] = np.clip(x[0] // 64, -1, 1).astype(np.int8) + np.int8(0)
    assert_bit_exact(model, x, f"L2_NORMALIZATION {shape}")


def test_l2_normalization_every_row_sum_of_small_rows():
    """Rows of 2 over every (a, b) pair: every sum of two squares up to 2 * 255^2."""
    v = np.arange(-128, 128, dtype=np.int8)
    x = np.stack(np.meshgrid(v, v, indexing="ij"), axis=-1).reshape(256 * 256, 2)
    for z in (0, -128, 37):
        model = build_model("L2_NORMALIZATION", [T([256 * 256, 2], scale=0.02, zero_point=z)],
                            [T([256 * 256, 2], scale=1 / 128, zero_point=0)])
        assert_bit_exact(model, [x], f"L2_NORMALIZATION pairs zp {z}")


def test_l2_normalization_rejects_a_wrong_output_scale():
    model = build_model("L2_NORMALIZATION", [T([2, 8], scale=0.1)], [T([2, 8], scale=0.01, zero_point=0)])
    with pytest.raises(EdgekitError, match="output must have scale 1/128"):
        HostRuntime(model)


# --- BATCH_MATMUL -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(32))
def test_batch_matmul_random(seed):
    rng = np.random.default_rng(8100 + seed)
    m, k, n = (int(v) for v in rng.integers(1, 17, size=3))
    rank = int(rng.integers(2, 6))
    batch = random_dims(rng, rank - 2, 24, max_dim=4)
    bx = [1 if rng.random() < 0.3 else d for d in batch][int(rng.integers(0, len(batch) + 1)):] if batch else []
    by = [1 if rng.random() < 0.3 else d for d in batch][int(rng.integers(0, len(batch) + 1)):] if batch else []
    out_batch = list(np.broadcast_shapes(tuple(bx), tuple(by)))
    adj_x, adj_y = bool(seed & 1), bool(seed & 2)
    sx, sy = log_uniform(rng, 1e-3, 0.5), log_uniform(rng, 1e-3, 0.5)
    so = sx * sy * np.sqrt(k) * 127 * log_uniform(rng, 0.05, 2.0)
    x_shape = bx + ([k, m] if adj_x else [m, k])
    y_shape = by + ([n, k] if adj_y else [k, n])
    constant_y = seed % 3 == 0  # a constant right-hand side (weights), common in real models
    y = T(y_shape, scale=sy, zero_point=zp(rng),
          data=rng.integers(-128, 128, size=y_shape).astype(np.int8) if constant_y else None)
    model = build_model("BATCH_MATMUL", [T(x_shape, scale=sx, zero_point=zp(rng)), y],
                        [T(out_batch + [m, n], scale=float(so), zero_point=zp(rng))], {"adj_x": adj_x, "adj_y": adj_y})
    assert_bit_exact(model, random_input(model, rng), f"BATCH_MATMUL {x_shape} x {y_shape} adj {adj_x} {adj_y}")


def test_batch_matmul_rejects_mismatched_inner_dimensions():
    model = build_model("BATCH_MATMUL", [T([2, 3]), T([4, 5])], [T([2, 5])])
    with pytest.raises(EdgekitError, match="inner dimensions of the inputs differ"):
        HostRuntime(model)


# --- LOG_SOFTMAX ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(24))
def test_log_softmax_random(seed):
    rng = np.random.default_rng(8200 + seed)
    shape = random_dims(rng, int(rng.integers(1, 5)), 3000, max_dim=40 if seed % 3 == 0 else 9)
    model = build_model("LOG_SOFTMAX", [T(shape, scale=log_uniform(rng, 1e-3, 2.0), zero_point=zp(rng))],
                        [T(shape, scale=16 / 256, zero_point=127)])
    assert_bit_exact(model, random_input(model, rng), f"LOG_SOFTMAX {shape}")


@pytest.mark.parametrize("scale", [0.004, 0.02, 0.0625, 0.3, 1.7])
def test_log_softmax_every_value_against_each_max(scale):
    """Rows [v, m] for every pair: every difference to the row max, every row sum of two exps."""
    v = np.arange(-128, 128, dtype=np.int8)
    x = np.stack(np.meshgrid(v, v, indexing="ij"), axis=-1).reshape(256 * 256, 2)
    model = build_model("LOG_SOFTMAX", [T([256 * 256, 2], scale=scale, zero_point=3)],
                        [T([256 * 256, 2], scale=16 / 256, zero_point=127)])
    assert_bit_exact(model, [x], f"LOG_SOFTMAX pairs scale {scale}")
