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
