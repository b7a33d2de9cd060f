"""Channels with a constant output (trained networks' dead filters) in CONV_2D and DEPTHWISE_CONV_2D, bit-exact
against LiteRT BUILTIN_REF on the device (QEMU mps2-an386: the Cortex-M4 assembly, expanded records without the
constant channels; mps3-an547: the Helium paths) and on the host (portable C, in-place and prepared).

One seeded graph mixes, per layer, live channels with channels whose output is provably one value: effective scales
so small that TFLite's QuantizeMultiplier gives multiplier 0 (shift beyond -31), tiny scales with folded biases near
the int32 limit (constant != zero point), ReLU channels that are always clamped, and live channels with right
shifts beyond EK_CONV_ZP_FOLD_MAX_E whose accumulator bound still allows the zero-point fold (or, with zero point
-128, does not: the layer then keeps the int8-weight block). Layers: 1x1 and 3x3 stride-2 CONV_2D (one with every
channel constant), depthwise 3x3 SAME stride 1, 5x5 SAME stride 2 (asymmetric padding), 3x3 with depth multiplier 2.
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tests.firmware.opmodels import T, build_graph

needs_qemu = pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                                reason="qemu-system-arm or arm-none-eabi-gcc is not installed")

IN_SCALE = 0.05


def _channel_kinds(rng, oc: int, depth: int, live_eff: float, zp_fold_live: bool):
    """(effective scales, biases) per channel: live ones, and every kind of constant channel."""
    eff = [live_eff * float(10 ** rng.uniform(-0.3, 0.3)) for _ in range(oc)]
    bias = [int(v) for v in rng.integers(-3000, 3000, size=oc)]
    for o in range(oc):
        kind = o % 6
        if kind == 1:    # multiplier 0: QuantizeMultiplier's shift < -31
            eff[o], bias[o] = 3e-13, int(rng.integers(-10**6, 10**6))
        elif kind == 3:  # tiny scale, folded bias near the int32 limit: constant, not the zero point
            eff[o] = 1e-9
            bias[o] = int(rng.choice([-1, 1]) * (2.1e9 - depth * 127 * 256 - int(rng.integers(0, 10**8))))
        elif kind == 5:  # always below the ReLU clamp
            bias[o] = -int(depth * 127 * 256 + 10**6)
        elif kind == 4 and zp_fold_live:  # live, right shift ~26: straddles a rounding boundary
            eff[o] = 2e-8
            bias[o] = int(round(3.5 / 2e-8))
    return eff, bias


def constant_channel_graph(seed: int = 25) -> bytes:
    rng = np.random.default_rng(seed)
    tensors = [T((1, 12, 10, 8), scale=IN_SCALE, zero_point=-7)]
    shapes = {0: (12, 10, 8)}
    ops = []

    def add(op, src, wshape, eff, bias, out_shape, out_zp, options):
        in_scale = tensors[src].scale
        out_scale = 0.1
        ws = [e * out_scale / in_scale for e in eff]
        wt = rng.integers(-127, 128, size=wshape).astype(np.int8)
        base = len(tensors)
        tensors.extend([T(wshape, scale=ws, data=wt, quantized_dimension=0 if op == "CONV_2D" else 3),
                        T((len(eff),), "int32", scale=[in_scale * s for s in ws], data=np.array(bias, np.int32)),
                        T((1,) + out_shape, scale=out_scale, zero_point=out_zp)])
        ops.append((op, [src, base, base + 1], [base + 2], options))
        shapes[base + 2] = out_shape
        return base + 2

    def conv(src, oc, k, stride=1, out_zp=-3, zp_fold_live=True, all_constant=False):
        h, w, c = shapes[src]
        oh, ow = (h + stride - 1) // stride, (w + stride - 1) // stride
        eff, bias = _channel_kinds(rng, oc, k * k * c, 0.1 / (k * k * c) ** 0.5 / 127 / 20, zp_fold_live)
        if all_constant:
            eff = [3e-13 if o % 2 else 1e-9 for o in range(oc)]
        return add("CONV_2D", src, (oc, k, k, c), eff, bias, (oh, ow, oc), out_zp,
                   {"padding": "SAME", "stride_h": stride, "stride_w": stride, "fused_activation_function": "RELU"})

    def dw(src, k, stride=1, mult=1, out_zp=-3):
        h, w, c = shapes[src]
        oc = c * mult
        oh, ow = (h + stride - 1) // stride, (w + stride - 1) // stride
        eff, bias = _channel_kinds(rng, oc, k * k, 0.1 / k / 127 / 20, True)
        return add("DEPTHWISE_CONV_2D", src, (1, k, k, oc), eff, bias, (oh, ow, oc), out_zp,
                   {"padding": "SAME", "stride_h": stride, "stride_w": stride, "depth_multiplier": mult,
                    "fused_activation_function": "RELU"})

    a = conv(0, 24, 1)                                  # 1x1: expanded records without the constant channels
    b = conv(0, 24, 1, out_zp=-128)                     # a live shift-26 channel with zp -128: no zero-point fold
    c = dw(a, 3)                                        # depthwise 3x3 SAME stride 1, 24 channels
    d = dw(a, 5, stride=2)                              # 5x5 SAME stride 2: asymmetric padding
    e = dw(0, 3, mult=2)                                # depth multiplier 2
    f = conv(a, 20, 3, stride=2)                        # 3x3 stride 2 over 24 channels
    g = conv(0, 8, 1, all_constant=True)                # every channel constant: no records at all
    return build_graph(tensors, ops, [0], [b, c, d, e, f, g])


def test_constant_channels_are_bit_exact_on_the_host():
    from tests.firmware.opmodels import random_input
    from tests.firmware.test_kernels_conv import assert_bit_exact

    model = constant_channel_graph()
    for seed in (1, 2):
        assert_bit_exact(model, random_input(model, np.random.default_rng(seed)), "constant-channel graph")


def test_constant_channel_graph_has_constant_and_live_outputs():
    """The graph exercises what it claims: per layer some channels are constant, others vary (BUILTIN_REF)."""
    from tests.firmware.opmodels import random_input, reference

    model = constant_channel_graph()
    outs = [reference(model, random_input(model, np.random.default_rng(s))) for s in (1, 2, 3)]
    for i in range(len(outs[0]) - 1):  # the last output is all constant by construction
        stacked = np.concatenate([o[i].reshape(-1, o[i].shape[-1]) for o in outs])
        varying = (stacked.max(axis=0) != stacked.min(axis=0))
        assert varying.any() and not varying.all(), f"output {i}: {int(varying.sum())} of {varying.size} vary"
    last = np.concatenate([o[-1].reshape(-1, o[-1].shape[-1]) for o in outs])
    assert (last.max(axis=0) == last.min(axis=0)).all()


@pytest.mark.slow
@needs_qemu
@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547"])
def test_constant_channels_are_bit_exact_on_the_device(tmp_path, cli, board):
    model = tmp_path / "constant_channels.tflite"
    model.write_bytes(constant_channel_graph())
    out = tmp_path / "run"
    assert cli("run", model, "--device", f"qemu:{board}", "-n", "2", "-o", out) == 0
    exact = json.loads((out / "run.json").read_text())["outputs_bit_exact"]
    assert exact["bit_exact"] is True and exact["differing_elements"] == 0
    assert exact["total_elements"] > 0
