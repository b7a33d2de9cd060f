"""FULLY_CONNECTED with int16 activations (16x8: int16 input/output, int8 weights, int64 bias) bit-exact with LiteRT
BUILTIN_REF, per-tensor and per-channel weights, in place and prepared."""
from __future__ import annotations

import numpy as np
import pytest

from edgekit.firmware import host_runtime as hr
from tests.firmware.opmodels import T, build_model, reference

CASES = [  # (batches, depth, units, per_channel, bias dtype, activation)
    (1, 16, 8, False, "int64", "NONE"), (3, 10, 5, True, "int64", "RELU"), (2, 33, 7, True, None, "NONE"),
    (4, 64, 12, False, "int64", "RELU6"), (1, 7, 3, True, "int64", "RELU_N1_TO_1"),
]


def fc16_model(rng, batches, depth, units, per_channel, bias_dtype, activation) -> bytes:
    s_in, s_out = float(rng.uniform(1e-4, 5e-4)), float(rng.uniform(3e-3, 8e-3))  # few saturated outputs
    w_scale = [float(v) for v in rng.uniform(0.002, 0.02, units)] if per_channel else float(rng.uniform(0.002, 0.02))
    weights = T((units, depth), "int8", w_scale, [0] * units if per_channel else 0,
                data=rng.integers(-127, 128, (units, depth)))
    bias = None
    if bias_dtype:
        b_scale = [s_in * s for s in w_scale] if per_channel else s_in * w_scale
        bias = T((units,), bias_dtype, b_scale, [0] * units if per_channel else 0,
                 data=rng.integers(-200000, 200000, (units,)))
    return build_model("FULLY_CONNECTED", [T((batches, depth), "int16", s_in, 0), weights, bias],
                       [T((batches, units), "int16", s_out, 0)], {"fused_activation_function": activation})


@pytest.mark.parametrize("optimize", [None, "balanced"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_int16_fully_connected_is_bit_exact(case, optimize):
    rng = np.random.default_rng(40 + case)
    model = fc16_model(rng, *CASES[case])
    rt = hr.HostRuntime(model, optimize=optimize)
    for _ in range(4):
        x = rng.integers(-32768, 32768, rt.inputs[0]["shape"], dtype=np.int16)
        want = reference(model, [x])[0]
        got = rt.invoke([x])[0]
        assert got.dtype == np.int16 and np.array_equal(want, got), f"{int((want != got).sum())} of {want.size} differ"
