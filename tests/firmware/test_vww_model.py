"""The MobileNet-v1 0.25 96x96 VWW-style model (tests/benchmarks/vww_model.py) through the host runtime, bit-exact.

It is the depthwise-separable 96x96 network of issue 12's fourth target: the RGB first convolution (depth 27, not
a multiple of 4: the zero-padded weight rows), 13 depthwise 3x3 layers at strides 1 and 2, 1x1 convolutions from
8 to 256 channels and a per-tensor FULLY_CONNECTED head all run the same C the device runs.
"""
from __future__ import annotations

import numpy as np
import pytest

from edgekit.firmware.host_runtime import HostRuntime, op_codes, op_name
from tests.firmware.opmodels import random_input, reference


@pytest.mark.slow
def test_vww_model_is_deterministic_mobilenet_and_bit_exact():
    from edgekit.tflite_graph import read_graph
    from tests.benchmarks.vww_model import vww_int8

    model = vww_int8()
    assert vww_int8() == model  # cached, same bytes
    ops = [op_name(c) for c in op_codes(model)]
    assert ops.count("DEPTHWISE_CONV_2D") == 13 and ops.count("CONV_2D") == 14
    assert {"AVERAGE_POOL_2D", "FULLY_CONNECTED", "SOFTMAX"} <= set(ops)
    assert sum(read_graph(model).macs().values()) == 7_489_664
    rng = np.random.default_rng(12)
    rt = HostRuntime(model)
    inputs = random_input(model, rng)
    assert np.array_equal(np.asarray(reference(model, inputs)[0]), np.asarray(rt.invoke(inputs)[0]))
