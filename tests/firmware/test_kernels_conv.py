"""CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, AVERAGE_POOL_2D, MAX_POOL_2D of the edgekit C runtime
against LiteRT BUILTIN_REF: randomized (seeded) single-op models, exact equality (0 differing elements).

Each case draws shapes, strides, paddings, dilations, depth multipliers, per-tensor or per-channel scales,
zero points, fused activations and bias presence; scales are drawn so that every requantization path of
the kernels is taken (right shift, shift 0, left shift). The runtime is the host build of
firmware/runtime (edgekit.firmware.host_runtime); the oracle is tests/firmware/opmodels.reference.
"""
from __future__ import annotations

import itertools
import math
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from edgekit.errors import InvalidModelError, UnsupportedOpError
from edgekit.firmware.host_runtime import RUNTIME_DIR, HostRuntime
from tests.firmware.opmodels import T, build_graph, build_model, random_input, reference

ACTIVATIONS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]
KERNELS = RUNTIME_DIR / "src" / "kernels"
# Every case runs on the in-place .tflite path and on a prepared model with the overlapped plan, alternating the
# kernel variants of --optimize speed and ram between cases (the fuzzer and the benchmark cover all modes too).
PREPARED_MODES = itertools.cycle(("speed", "ram"))


def out_size(padding: str, size: int, k: int, stride: int, dilation: int) -> int:
    """TFLite ComputeOutSize (padding.h)."""
    eff = (k - 1) * dilation + 1
    return (size + stride - 1) // stride if padding == "SAME" else (size + stride - eff) // stride


def assert_bit_exact(model: bytes, inputs, what: str, runtime_model: bytes | None = None) -> None:
    expected = reference(model, inputs)
    # the in-place .tflite path, then the prepared model with the overlapped plan forced on (the graph input dies
    # at op 0, so the output overlaps it as the kernel declares) for both kernel variants (speed / ram)
    for optimize in (None, next(PREPARED_MODES)):
        got = HostRuntime(runtime_model or model, optimize=optimize).invoke(inputs)
        for e, g in zip(expected, got):
            assert g.shape == e.shape and g.dtype == e.dtype, what
            differing = int(np.count_nonzero(g != e))
            assert differing == 0, f"{what} (optimize={optimize}): {differing} of {e.size} elements differ (max |d| " \
                                   f"{int(np.max(np.abs(g.astype(np.int32) - e.astype(np.int32))))})"


def output_scale(rng, in_scale: float, w_scale: float, depth: int) -> float:
    """Mostly a realistic scale (outputs spread over int8); sometimes one giving shift 0 or a left shift."""
    r = rng.random()
    if r < 0.08:
        eff = float(rng.uniform(1.0, 6.0))      # left shift
    elif r < 0.16:
        eff = float(rng.uniform(0.5, 0.99))     # shift 0
    else:
        eff = 0.012 / math.sqrt(depth) * float(10 ** rng.uniform(-0.5, 0.5))
    return in_scale * w_scale / eff


def weight_scales(rng, channels: int, per_channel: bool):
    s = (10 ** rng.uniform(-3, -1, size=channels)).astype(np.float32)
    return [float(v) for v in s] if per_channel else float(s[0])


def spatial(rng, padding: str):
    """(size, kernel, stride, dilation) for one dimension with a non-empty output."""
    while True:
        size, k = int(rng.integers(1, 11)), int(rng.integers(1, 6))
        stride = int(rng.integers(1, 4))
        dilation = 1 if rng.random() < 0.6 else int(rng.integers(2, 4))
        if out_size(padding, size, k, stride, dilation) >= 1:
            return size, k, stride, dilation


def conv_case(rng, *, groups_allowed: bool = True):
    padding = str(rng.choice(["SAME", "VALID"]))
    h, kh, sh, dh = spatial(rng, padding)
    w, kw, sw, dw = spatial(rng, padding)
    batch = int(rng.integers(1, 3))
    fc = int(rng.choice([1, 2, 3, 4, 5, 8, 12, 16]))
    groups = int(rng.choice([1, 1, 1, 2, 3])) if groups_allowed else 1
    ic = fc * groups
    oc = groups * int(rng.integers(1, 7))
    per_channel = rng.random() < 0.7
    in_scale = float(10 ** rng.uniform(-2.5, 0))
    ws = weight_scales(rng, oc, per_channel)
    wmean = float(np.mean(ws))
    os_ = output_scale(rng, in_scale, wmean, kh * kw * fc)
    wt = rng.integers(-127, 128, size=(oc, kh, kw, fc)).astype(np.int8)
    bias = rng.integers(-20000, 20000, size=(oc,)).astype(np.int32)
    bscale = [in_scale * s for s in ws] if per_channel else in_scale * ws
    oh, ow = out_size(padding, h, kh, sh, dh), out_size(padding, w, kw, sw, dw)
    act = str(rng.choice(ACTIVATIONS))
    inputs = [T((batch, h, w, ic), scale=in_scale, zero_point=int(rng.integers(-128, 128))),
              T((oc, kh, kw, fc), scale=ws, data=wt),
              T((oc,), "int32", scale=bscale, data=bias)]
    output = T((batch, oh, ow, oc), scale=os_, zero_point=int(rng.integers(-128, 128)))
    options = {"padding": padding, "stride_h": sh, "stride_w": sw, "dilation_h_factor": dh, "dilation_w_factor": dw,
               "fused_activation_function": act}
    desc = f"conv in={inputs[0].shape} w={wt.shape} s=({sh},{sw}) d=({dh},{dw}) {padding} {act} pc={per_channel}"
    return inputs, output, options, desc


@pytest.mark.parametrize("seed", range(4))
def test_conv_2d_random(seed):
    rng = np.random.default_rng(1000 + seed)
    for _ in range(40):
        inputs, output, options, desc = conv_case(rng)
        model = build_model("CONV_2D", inputs, [output], options)
        assert_bit_exact(model, random_input(model, rng), desc)


def test_conv_2d_without_bias_equals_zero_bias():
    """LiteRT's CONV_2D insists on a bias; ours accepts none (TFLM does): compare with an all-zero bias."""
    rng = np.random.default_rng(7)
    for _ in range(10):
        inputs, output, options, desc = conv_case(rng)
        oc = inputs[1].shape[0]
        zero_bias = T((oc,), "int32", scale=inputs[2].scale, data=np.zeros(oc, np.int32))
        with_zero = build_model("CONV_2D", [inputs[0], inputs[1], zero_bias], [output], options)
        absent = build_model("CONV_2D", [inputs[0], inputs[1], None], [output], options)
        two_inputs = build_model("CONV_2D", [inputs[0], inputs[1]], [output], options)
        x = random_input(with_zero, rng)
        assert_bit_exact(with_zero, x, desc + " bias=-1", runtime_model=absent)
        assert_bit_exact(with_zero, x, desc + " 2 inputs", runtime_model=two_inputs)


def test_conv_2d_filter_as_graph_input():
    """Non-constant weights (a graph input) take the same kernels."""
    rng = np.random.default_rng(11)
    for _ in range(6):
        inputs, output, options, desc = conv_case(rng, groups_allowed=False)
        filt = inputs[1]
        as_input = T(filt.shape, scale=filt.scale, zero_point=0)
        model = build_model("CONV_2D", [inputs[0], as_input, inputs[2]], [output], options)
        x = random_input(model, rng)
        x[1] = np.clip(x[1], -127, 127).astype(np.int8)
        assert_bit_exact(model, x, desc + " filter=input")


@pytest.mark.parametrize("stride,dilation,padding", [(2, 1, "SAME"), (1, 2, "SAME"), (2, 1, "VALID"), (1, 1, "SAME")])
def test_conv_2d_rgb_first_layer_and_expanded_weights(stride, dilation, padding):
    """3x3 windows on 3 channels (the im2col that builds a window inside the image from its three 9-byte runs; border
    windows take the gathered path) and, on the prepared path, the expanded int16 weight records with partial
    4-pixel blocks (odd map sizes) and a narrow clamp: bit-exact on the in-place and the prepared path."""
    rng = np.random.default_rng(100 + stride * 10 + dilation)
    h, w, oc = 13, 11, 8
    ws = [float(v) for v in rng.uniform(0.002, 0.01, size=oc)]
    wt = rng.integers(-127, 128, size=(oc, 3, 3, 3)).astype(np.int8)
    bias = rng.integers(-3000, 3000, size=(oc,)).astype(np.int32)
    oh, ow = out_size(padding, h, 3, stride, dilation), out_size(padding, w, 3, stride, dilation)
    for act, out_zp in (("RELU", -128), ("RELU6", 9)):
        model = build_model("CONV_2D", [T((1, h, w, 3), scale=0.02, zero_point=-7), T((oc, 3, 3, 3), scale=ws, data=wt),
                                        T((oc,), "int32", scale=[0.02 * s for s in ws], data=bias)],
                            [T((1, oh, ow, oc), scale=0.04, zero_point=out_zp)],
                            {"padding": padding, "stride_h": stride, "stride_w": stride, "dilation_h_factor": dilation,
                             "dilation_w_factor": 1, "fused_activation_function": act})
        assert_bit_exact(model, random_input(model, rng), f"rgb conv s{stride} d{dilation} {padding} {act}")


def test_conv_2d_large_depth_uses_reference_loops():
    """A receptive field too large for the im2col scratch block (> EK_CONV_SCRATCH_MAX) stays exact."""
    rng = np.random.default_rng(5)
    ic, oc = 300, 3
    wt = rng.integers(-127, 128, size=(oc, 3, 3, ic)).astype(np.int8)
    ws = [0.004, 0.003, 0.005]
    model = build_model("CONV_2D", [T((1, 4, 4, ic), scale=0.02, zero_point=-5), T((oc, 3, 3, ic), scale=ws, data=wt),
                                    T((oc,), "int32", scale=[0.02 * s for s in ws], data=np.arange(oc, dtype=np.int32))],
                        [T((1, 4, 4, oc), scale=0.05, zero_point=1)], {"padding": "SAME"})
    assert HostRuntime(model).plan["scratch"] == []
    assert_bit_exact(model, random_input(model, rng), "conv depth 2700")


def dw_case(rng):
    padding = str(rng.choice(["SAME", "VALID"]))
    h, kh, sh, dh = spatial(rng, padding)
    w, kw, sw, dw = spatial(rng, padding)
    batch = int(rng.integers(1, 3))
    ic = int(rng.choice([1, 2, 3, 4, 5, 8, 12, 16]))
    mult = int(rng.choice([1, 1, 1, 2, 3]))
    oc = ic * mult
    per_channel = rng.random() < 0.7
    in_scale = float(10 ** rng.uniform(-2.5, 0))
    ws = weight_scales(rng, oc, per_channel)
    os_ = output_scale(rng, in_scale, float(np.mean(ws)), kh * kw)
    wt = rng.integers(-127, 128, size=(1, kh, kw, oc)).astype(np.int8)
    bias = rng.integers(-20000, 20000, size=(oc,)).astype(np.int32)
    bscale = [in_scale * s for s in ws] if per_channel else in_scale * ws
    act = str(rng.choice(ACTIVATIONS))
    oh, ow = out_size(padding, h, kh, sh, dh), out_size(padding, w, kw, sw, dw)
    inputs = [T((batch, h, w, ic), scale=in_scale, zero_point=int(rng.integers(-128, 128))),
              T((1, kh, kw, oc), scale=ws, data=wt, quantized_dimension=3),
              T((oc,), "int32", scale=bscale, data=bias)]
    output = T((batch, oh, ow, oc), scale=os_, zero_point=int(rng.integers(-128, 128)))
    options = {"padding": padding, "stride_h": sh, "stride_w": sw, "dilation_h_factor": dh, "dilation_w_factor": dw,
               "depth_multiplier": mult, "fused_activation_function": act}
    desc = f"dw in={inputs[0].shape} w={wt.shape} m={mult} s=({sh},{sw}) d=({dh},{dw}) {padding} {act} pc={per_channel}"
    return inputs, output, options, desc


@pytest.mark.parametrize("seed", range(4))
def test_depthwise_conv_2d_random(seed):
    rng = np.random.default_rng(2000 + seed)
    for _ in range(40):
        inputs, output, options, desc = dw_case(rng)
        if rng.random() < 0.2:  # no bias: LiteRT wants 2 inputs; ours also takes a -1 bias slot
            model = build_model("DEPTHWISE_CONV_2D", inputs[:2], [output], options)
            absent = build_model("DEPTHWISE_CONV_2D", inputs[:2] + [None], [output], options)
            x = random_input(model, rng)
            assert_bit_exact(model, x, desc + " no bias")
            assert_bit_exact(model, x, desc + " bias=-1", runtime_model=absent)
            continue
        model = build_model("DEPTHWISE_CONV_2D", inputs, [output], options)
        assert_bit_exact(model, random_input(model, rng), desc)


def test_depthwise_conv_2d_filter_as_graph_input():
    rng = np.random.default_rng(13)
    for _ in range(6):
        inputs, output, options, desc = dw_case(rng)
        filt = inputs[1]
        as_input = T(filt.shape, scale=filt.scale, zero_point=0, quantized_dimension=3)
        model = build_model("DEPTHWISE_CONV_2D", [inputs[0], as_input, inputs[2]], [output], options)
        x = random_input(model, rng)
        x[1] = np.clip(x[1], -127, 127).astype(np.int8)
        assert_bit_exact(model, x, desc + " filter=input")


@pytest.mark.parametrize("h, w, stride, dilation, act", [
    (70, 70, 1, 1, "RELU6"),   # padded plane > scratch limit: ring of rows, dilation 1 (rows reused)
    (66, 66, 2, 1, "RELU"),    # ring, stride 2
    (40, 90, 1, 2, "NONE"),    # ring, dilation 2 (rows refilled)
])
def test_depthwise_conv_2d_large_maps(h, w, stride, dilation, act):
    rng = np.random.default_rng(h * w + stride)
    c = 6
    wt = rng.integers(-127, 128, size=(1, 3, 3, c)).astype(np.int8)
    oh, ow = out_size("SAME", h, 3, stride, dilation), out_size("SAME", w, 3, stride, dilation)
    model = build_model("DEPTHWISE_CONV_2D", [
        T((1, h, w, c), scale=0.05, zero_point=9), T((1, 3, 3, c), scale=[0.02] * c, data=wt, quantized_dimension=3),
        T((c,), "int32", scale=[0.001] * c, data=rng.integers(-3000, 3000, c).astype(np.int32))],
        [T((1, oh, ow, c), scale=0.1, zero_point=-3)],
        {"padding": "SAME", "stride_h": stride, "stride_w": stride, "dilation_h_factor": dilation,
         "dilation_w_factor": dilation, "depth_multiplier": 1, "fused_activation_function": act})
    assert_bit_exact(model, random_input(model, rng), f"dw {h}x{w} s{stride} d{dilation}")


def fc_case(rng):
    units, depth = int(rng.integers(1, 40)), int(rng.integers(1, 70))
    rank = int(rng.integers(1, 5))
    keep = rank > 1 and rng.random() < 0.4
    if keep:
        lead = [int(v) for v in rng.integers(1, 4, size=rank - 1)]
        in_shape, out_shape = tuple(lead + [depth]), tuple(lead + [units])
    else:
        batches = int(rng.integers(1, 4))
        if rank == 1:
            batches = 1
            in_shape = (depth,)
        else:  # any shape whose element count is batches * depth
            dims = [batches] + [1] * (rank - 2) + [depth]
            if rank > 2 and depth % 2 == 0:
                dims[-2], dims[-1] = 2, depth // 2
            in_shape = tuple(dims)
        out_shape = (batches, units)
    per_channel = rng.random() < 0.6
    in_scale = float(10 ** rng.uniform(-2.5, 0))
    ws = weight_scales(rng, units, per_channel)
    os_ = output_scale(rng, in_scale, float(np.mean(ws)), depth)
    w_zp = 0 if per_channel or rng.random() < 0.6 else int(rng.integers(-20, 21))
    wt = rng.integers(-127, 128, size=(units, depth)).astype(np.int8)
    bscale = [float(np.float32(in_scale) * np.float32(s)) for s in ws] if per_channel else \
        float(np.float32(in_scale) * np.float32(ws))
    bias = rng.integers(-20000, 20000, size=(units,)).astype(np.int32)
    act = str(rng.choice(ACTIVATIONS))
    inputs = [T(in_shape, scale=in_scale, zero_point=int(rng.integers(-128, 128))),
              T((units, depth), scale=ws, zero_point=w_zp, data=wt),
              T((units,), "int32", scale=bscale, data=bias) if rng.random() < 0.8 else None]
    output = T(out_shape, scale=os_, zero_point=int(rng.integers(-128, 128)))
    options = {"fused_activation_function": act, "keep_num_dims": keep}
    desc = f"fc in={in_shape} w={wt.shape} keep={keep} {act} pc={per_channel} wzp={w_zp} bias={inputs[2] is not None}"
    return inputs, output, options, desc


@pytest.mark.parametrize("seed", range(4))
def test_fully_connected_random(seed):
    rng = np.random.default_rng(3000 + seed)
    for _ in range(40):
        inputs, output, options, desc = fc_case(rng)
        model = build_model("FULLY_CONNECTED", inputs, [output], options)
        assert_bit_exact(model, random_input(model, rng), desc)


def test_fully_connected_out_of_range_rescale_wraps_like_the_reference():
    """round(acc * scale) beyond int32 becomes INT32_MIN, then the output zero point is added with wrap-around."""
    rng = np.random.default_rng(17)
    wt = rng.integers(-127, 128, size=(16, 8)).astype(np.int8)
    for zp in (0, -5, 5):
        model = build_model("FULLY_CONNECTED", [T((1, 8), scale=1.0), T((16, 8), scale=1.0, data=wt)],
                            [T((1, 16), scale=1e-6, zero_point=zp)])
        assert_bit_exact(model, random_input(model, rng), f"fc overflow zp={zp}")


def test_fully_connected_ties_follow_double_rounding():
    """Accumulators landing exactly on .5 after scaling: round() goes away from zero (not the fixed-point way)."""
    wt = np.eye(4, dtype=np.int8) * 1
    model = build_model("FULLY_CONNECTED", [T((1, 4), scale=0.5), T((4, 4), scale=1.0, data=wt)],
                        [T((1, 4), scale=1.0)])
    x = [np.array([[1, -1, 3, -3]], np.int8)]
    assert_bit_exact(model, x, "fc ties")
    assert HostRuntime(model).invoke(x)[0].tolist() == [[1, -1, 2, -2]]


def pool_case(rng):
    padding = str(rng.choice(["SAME", "VALID"]))
    while True:
        h, w = int(rng.integers(1, 12)), int(rng.integers(1, 12))
        fh, fw = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        sh, sw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        oh, ow = out_size(padding, h, fh, sh, 1), out_size(padding, w, fw, sw, 1)
        if oh >= 1 and ow >= 1:
            break
    batch, c = int(rng.integers(1, 3)), int(rng.integers(1, 10))
    scale, zp = float(10 ** rng.uniform(-2.5, 0)), int(rng.integers(-128, 128))
    act = str(rng.choice(ACTIVATIONS))
    options = {"padding": padding, "stride_h": sh, "stride_w": sw, "filter_height": fh, "filter_width": fw,
               "fused_activation_function": act}
    desc = f"in=({batch},{h},{w},{c}) f=({fh},{fw}) s=({sh},{sw}) {padding} {act}"
    return T((batch, h, w, c), scale=scale, zero_point=zp), T((batch, oh, ow, c), scale=scale, zero_point=zp), options, desc


@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
def test_pooling_random(op):
    rng = np.random.default_rng(4000 + (op == "MAX_POOL_2D"))
    for _ in range(80):
        x, y, options, desc = pool_case(rng)
        model = build_model(op, [x], [y], options)
        assert_bit_exact(model, random_input(model, rng), f"{op} {desc}")


def test_average_pool_global_window():
    """The KWS/IC head: one window over the whole feature map."""
    rng = np.random.default_rng(19)
    model = build_model("AVERAGE_POOL_2D", [T((1, 25, 5, 64), scale=0.1, zero_point=-20)],
                        [T((1, 1, 1, 64), scale=0.1, zero_point=-20)],
                        {"padding": "VALID", "filter_height": 25, "filter_width": 5, "stride_h": 25, "stride_w": 5})
    assert_bit_exact(model, random_input(model, rng), "global average pool")


def test_kernels_through_sanitized_runtime():
    """Small graphs through the ASan + UBSan build: no out-of-bounds access or undefined behaviour, still exact."""
    rng = np.random.default_rng(23)
    w1 = rng.integers(-127, 128, size=(8, 3, 3, 3)).astype(np.int8)
    w2 = rng.integers(-127, 128, size=(1, 3, 3, 8)).astype(np.int8)
    w3 = rng.integers(-127, 128, size=(5, 8)).astype(np.int8)
    s1, s2, s3 = [0.01] * 8, [0.02] * 8, [0.015] * 5
    tensors = [
        T((1, 9, 9, 3), scale=0.05, zero_point=-10),
        T((8, 3, 3, 3), scale=s1, data=w1), T((8,), "int32", scale=[0.0005] * 8, data=np.arange(8, dtype=np.int32)),
        T((1, 5, 5, 8), scale=0.1, zero_point=3),
        T((1, 3, 3, 8), scale=s2, data=w2, quantized_dimension=3), T((8,), "int32", scale=[0.002] * 8,
                                                                      data=np.arange(8, dtype=np.int32) * 7),
        T((1, 5, 5, 8), scale=0.2, zero_point=-7),
        T((1, 2, 2, 8), scale=0.2, zero_point=-7),
        T((5, 8 * 4 // 4), scale=s3, data=w3), T((5,), "int32", scale=[0.003] * 5, data=np.arange(5, dtype=np.int32)),
        T((4, 5), scale=0.3, zero_point=2),
    ]
    ops = [("CONV_2D", [0, 1, 2], [3], {"padding": "SAME", "stride_h": 2, "stride_w": 2, "fused_activation_function": "RELU"}),
           ("DEPTHWISE_CONV_2D", [3, 4, 5], [6], {"padding": "SAME", "depth_multiplier": 1}),
           ("MAX_POOL_2D", [6], [7], {"padding": "VALID", "filter_height": 2, "filter_width": 2, "stride_h": 2,
                                      "stride_w": 2}),
           ("FULLY_CONNECTED", [7, 8, 9], [10], {})]
    model = build_graph(tensors, ops, [0], [10])
    x = random_input(model, rng)
    expected = reference(model, x)[0]
    got = HostRuntime(model, sanitize=True).invoke(x)[0]
    assert np.array_equal(got, expected)

    # a large map (depthwise ring of rows), a 1x1 conv on whole channel groups, the word-wise average pool
    w4 = rng.integers(-127, 128, size=(1, 3, 3, 8)).astype(np.int8)
    w5 = rng.integers(-127, 128, size=(12, 1, 1, 8)).astype(np.int8)
    tensors = [
        T((1, 70, 66, 8), scale=0.05, zero_point=5),
        T((1, 3, 3, 8), scale=[0.02] * 8, data=w4, quantized_dimension=3),
        T((8,), "int32", scale=[0.001] * 8, data=np.arange(8, dtype=np.int32)),
        T((1, 35, 33, 8), scale=0.1, zero_point=-4),
        T((12, 1, 1, 8), scale=[0.01] * 12, data=w5), T((12,), "int32", scale=[0.001] * 12,
                                                         data=np.arange(12, dtype=np.int32)),
        T((1, 35, 33, 12), scale=0.2, zero_point=6),
        T((1, 7, 7, 12), scale=0.2, zero_point=6),
    ]
    ops = [("DEPTHWISE_CONV_2D", [0, 1, 2], [3], {"padding": "SAME", "stride_h": 2, "stride_w": 2}),
           ("CONV_2D", [3, 4, 5], [6], {"padding": "VALID", "fused_activation_function": "RELU6"}),
           ("AVERAGE_POOL_2D", [6], [7], {"padding": "SAME", "filter_height": 5, "filter_width": 5, "stride_h": 5,
                                          "stride_w": 5})]
    model = build_graph(tensors, ops, [0], [7])
    x = random_input(model, rng)
    assert np.array_equal(HostRuntime(model, sanitize=True).invoke(x)[0], reference(model, x)[0])


@pytest.mark.parametrize("name", ["kws_ref_model_int8", "ic_resnet8_int8", "ad_autoencoder_int8"])
def test_mlperf_tiny_models_bit_exact(mlperf, name):
    """Whole MLPerf Tiny models (needs every op's kernel in the runtime; skips until they all exist)."""
    model = (mlperf / f"{name}.tflite").read_bytes()
    try:
        rt = HostRuntime(model)
    except UnsupportedOpError as e:
        pytest.skip(f"runtime lacks kernels for {name}: {e}")
    rng = np.random.default_rng(29)
    for _ in range(3):
        x = random_input(model, rng)
        expected = reference(model, x)
        for e, g in zip(expected, rt.invoke(x)):
            assert int(np.count_nonzero(e != g)) == 0, name


# --- rejections: prepare() refuses what it cannot compute exactly, with one clear message ---------------

def _conv_model(**over):
    wt = np.ones((2, 3, 3, 4), np.int8)
    parts = dict(input=T((1, 5, 5, 4), scale=0.1), filter=T((2, 3, 3, 4), scale=[0.01, 0.02], data=wt),
                 bias=T((2,), "int32", scale=[0.001, 0.002], data=np.zeros(2, np.int32)),
                 output=T((1, 5, 5, 2), scale=0.2), options={"padding": "SAME"})
    parts.update(over)
    return build_model("CONV_2D", [parts["input"], parts["filter"], parts["bias"]], [parts["output"]], parts["options"])


@pytest.mark.parametrize("case, error, message", [
    ({"output": T((1, 4, 4, 2), scale=0.2)}, InvalidModelError, "output shape differs"),
    ({"filter": T((2, 3, 3, 4), scale=[0.01, 0.02], zero_point=[0, 3], data=np.ones((2, 3, 3, 4), np.int8))},
     UnsupportedOpError, "zero points must be 0"),
    ({"options": {"padding": "SAME", "fused_activation_function": "TANH"}}, UnsupportedOpError, "fused activation"),
    ({"options": {"padding": "SAME", "stride_w": 0}}, InvalidModelError, "strides and dilations"),
    ({"input": T((1, 5, 5, 3), scale=0.1)}, InvalidModelError, "multiple of the filter"),
    ({"bias": T((3,), "int32", scale=0.001, data=np.zeros(3, np.int32))}, InvalidModelError, "bias"),
    ({"input": T((1, 5, 5, 4), scale=0.0)}, InvalidModelError, "finite positive scale"),
    ({"output": T((1, 5, 5, 2), scale=1e-12)}, UnsupportedOpError, "effective output scale too large"),
    ({"filter": T((2, 3, 3, 4), scale=[0.01, 0.02, 0.03], data=np.ones((2, 3, 3, 4), np.int8),
                  quantized_dimension=1)}, InvalidModelError, "one scale or one per output channel"),
])
def test_conv_2d_prepare_rejects(case, error, message):
    with pytest.raises(error, match=message):
        HostRuntime(_conv_model(**case))


def test_fully_connected_prepare_rejects():
    wt = np.ones((3, 4), np.int8)
    bad_shape = build_model("FULLY_CONNECTED", [T((1, 4), scale=0.1), T((3, 4), scale=0.01, data=wt)],
                            [T((1, 4), scale=0.1)])
    with pytest.raises(InvalidModelError, match="batches x units"):
        HostRuntime(bad_shape)
    bad_bias = build_model("FULLY_CONNECTED", [T((1, 4), scale=0.1), T((3, 4), scale=0.01, data=wt),
                                              T((3,), "int32", scale=1.0, data=np.zeros(3, np.int32))],
                           [T((1, 3), scale=0.1)])
    with pytest.raises(InvalidModelError, match="bias scale"):
        HostRuntime(bad_bias)
    shuffled = build_model("FULLY_CONNECTED", [T((1, 4), scale=0.1), T((3, 4), scale=0.01, data=wt)],
                           [T((1, 3), scale=0.1)], {"weights_format": "SHUFFLED4x16INT8"})
    with pytest.raises(UnsupportedOpError, match="shuffled"):
        HostRuntime(shuffled)


def test_pooling_prepare_rejects():
    model = build_model("MAX_POOL_2D", [T((1, 4, 4, 2), scale=0.1)], [T((1, 4, 4, 2), scale=0.1)],
                        {"padding": "VALID", "filter_height": 0, "filter_width": 2})
    with pytest.raises(InvalidModelError, match="filter sizes"):
        HostRuntime(model)


# --- the integer arithmetic the kernels use, against its definition --------------------------------------

_ARITH_TEST = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "ek_conv_common.h"

ek_status ek_fail(ek_context *c, const ek_op *o, ek_status s, const char *m) { (void)c; (void)o; (void)m; return s; }
int32_t ek_num_elements(const ek_tensor *t) { (void)t; return 0; }

static uint64_t state = 88172645463325252ull;
static uint64_t next(void) { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state; }
static int32_t any_int32(void) {
  static const int32_t edges[] = {0, 1, -1, 2, -2, 3, -3, INT32_MAX, INT32_MIN, INT32_MIN + 1, 1 << 30, -(1 << 30),
                                  (1 << 30) + 1, -(1 << 30) - 1, 2147483646, -2147483646, 32767, -32768, 65025,
                                  -65025};
  uint64_t r = next();
  if ((r & 7) == 0) return edges[(r >> 3) % (sizeof edges / sizeof edges[0])];
  if ((r & 7) == 1) return (int32_t)((int64_t)(r >> 8) % 200001) - 100000;
  return (int32_t)(uint32_t)(r >> 16);
}
static double any_scale(void) {
  uint64_t r = next();
  double m = (double)(r >> 11) / 9007199254740992.0 + 0.5;   /* [0.5, 1.5) with 53 random bits */
  int e = (int)((r >> 3) % 70) - 60;
  return ldexp(m, e);
}

int main(void) {
  long bad_round = 0, bad_requant = 0, checked_requant = 0, fast_used = 0;
  for (long i = 0; i < 3000000; ++i) {
    const int32_t acc = any_int32();
    const double eff = any_scale();
    ek_dscale d;
    ek_dscale_init(&d, eff);
    const double v = round((double)acc * eff);
    const int32_t want = (v >= -2147483648.0 && v < 2147483648.0) ? (int32_t)v : INT32_MIN;
    if (ek_dround_mul(acc, &d) != want) {
      if (bad_round < 5) printf("dround acc=%d eff=%.17g got %d want %d\n", acc, eff, ek_dround_mul(acc, &d), want);
      ++bad_round;
    }
    ek_dfast f;
    ek_dfast_init(&f, &d, (next() & 1) ? 2147483647 : (acc < 0 ? -(int64_t)acc : (int64_t)acc));
    fast_used += f.sh != 0;
    if (ek_dround_fast(acc, &f, &d) != want) {
      if (bad_round < 5) printf("dround_fast acc=%d eff=%.17g got %d want %d\n", acc, eff, ek_dround_fast(acc, &f, &d), want);
      ++bad_round;
    }
    /* short mantissas: many products land exactly on .5 or just beside it */
    const double eff2 = ldexp((double)(next() % 4096 + 1), -(int)(next() % 40) - 12);
    ek_dscale d2;
    ek_dscale_init(&d2, eff2);
    const int32_t acc2 = (int32_t)(next() % 2000001) - 1000000;
    ek_dfast f2;
    ek_dfast_init(&f2, &d2, (next() & 1) ? 1000000 : (acc2 < 0 ? -(int64_t)acc2 : (int64_t)acc2));
    const double v2 = round((double)acc2 * eff2);
    const int32_t want2 = (v2 >= -2147483648.0 && v2 < 2147483648.0) ? (int32_t)v2 : INT32_MIN;
    if (ek_dround_fast(acc2, &f2, &d2) != want2) {
      if (bad_round < 5) printf("dround_fast acc=%d eff=%.17g want %d\n", acc2, eff2, want2);
      ++bad_round;
    }
    ek_conv_channel ch;
    int fast = 1;
    const int32_t small = acc / 2; /* the fast requantization's domain: |acc| < 2^30 */
    if (eff < 1073741824.0 && ek_conv_channel_init(&ch, eff, &fast) && fast && small > -(1 << 30) && small < (1 << 30)) {
      ++checked_requant;
      if (ek_conv_requant_fast(small, &ch) != ek_mbqm(small, ch.multiplier, ek_conv_shift(&ch))) {
        if (bad_requant < 5) printf("requant acc=%d m=%d shift=%d\n", small, ch.multiplier, ek_conv_shift(&ch));
        ++bad_requant;
      }
    }
  }
  printf("%ld %ld %ld %ld\n", bad_round, bad_requant, checked_requant, fast_used);
  return 0;
}
"""


def test_integer_rounding_helpers_match_their_definitions(tmp_path: Path):
    """ek_dround_mul and ek_dround_fast == (int32)round((double)acc * eff) and the branch-free requantization ==
    ek_mbqm, over 3 million (accumulator, scale) pairs including int32 edges (plus 3 million short-mantissa
    scales whose products land on or beside .5)."""
    src = tmp_path / "arith.c"
    src.write_text(textwrap.dedent(_ARITH_TEST))
    exe = tmp_path / "arith"
    subprocess.run(["gcc", "-std=c99", "-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-I", str(RUNTIME_DIR / "include"),
                    "-I", str(KERNELS), "-o", str(exe), str(src), "-lm"], check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.strip().splitlines()
    bad_round, bad_requant, checked, fast_used = (int(v) for v in out[-1].split())
    assert bad_round == 0 and bad_requant == 0, "\n".join(out)
    assert checked > 1_000_000 and fast_used > 1_000_000


_ZP_FOLD_TEST = r"""
#include <math.h>
#include <stdio.h>
#include "ek_conv_common.h"

ek_status ek_fail(ek_context *c, const ek_op *o, ek_status s, const char *m) { (void)c; (void)o; (void)m; return s; }
int32_t ek_num_elements(const ek_tensor *t) { (void)t; return 0; }

static uint64_t state = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state; }

int main(void) {
  long bad = 0, checked = 0;
  static const int32_t edges[] = {0, 1, -1, (1 << 30) - 1, -(1 << 30) + 1, 65025, -65025, 12345678, -12345678};
  for (long i = 0; i < 3000000; ++i) {
    const uint64_t r = next();
    int32_t acc = (r & 7) == 0 ? edges[(r >> 3) % 9] : (int32_t)((int64_t)(r >> 20) % (1 << 30));
    if ((r >> 63) & 1) acc = -acc;
    const double eff = ldexp((double)(next() >> 11) / 9007199254740992.0 + 0.5, -(int)(next() % 30) - 1);
    const int32_t zp = (int32_t)(next() % 256) - 128;
    ek_conv_channel ch;
    int fast = 1;
    if (!ek_conv_channel_init(&ch, eff, &fast) || !fast || ek_conv_exponent(&ch) > EK_CONV_ZP_FOLD_MAX_E) continue;
    ++checked;
    const int32_t want = ek_mbqm(acc, ch.multiplier, ek_conv_shift(&ch)) + zp;
    const int32_t got = ek_conv_requant_zp2(acc + acc, ch.multiplier, ek_conv_half_zp(&ch, zp), ek_conv_exponent(&ch));
    if (got != want) {
      if (bad < 5) printf("acc=%d m=%d e=%d zp=%d got %d want %d\n", acc, ch.multiplier, ek_conv_exponent(&ch), zp,
                          got, want);
      ++bad;
    }
  }
  printf("%ld %ld\n", bad, checked);
  return 0;
}
"""


def test_requantization_with_folded_zero_point_matches_mbqm(tmp_path: Path):
    """The doubled-accumulator requantization with the output zero point in the rounding constant (the depthwise
    DSP pass and the conv assembly) equals MultiplyByQuantizedMultiplier + zero point for every |acc| < 2^30 and
    exponent <= EK_CONV_ZP_FOLD_MAX_E, over 3 million draws including accumulator edges."""
    src = tmp_path / "zp_fold.c"
    src.write_text(textwrap.dedent(_ZP_FOLD_TEST))
    exe = tmp_path / "zp_fold"
    subprocess.run(["gcc", "-std=c99", "-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-I", str(RUNTIME_DIR / "include"),
                    "-I", str(KERNELS), "-o", str(exe), str(src), "-lm"], check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.strip().splitlines()
    bad, checked = (int(v) for v in out[-1].split())
    assert bad == 0, "\n".join(out)
    assert checked > 1_000_000


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D"])
def test_tiny_output_scale_beyond_the_zero_point_fold_stays_exact(op):
    """Effective scales below 2^-23 (exponent > EK_CONV_ZP_FOLD_MAX_E) leave the folded fast paths; the result
    must still equal BUILTIN_REF, zero points and clamps included."""
    rng = np.random.default_rng(23)
    c, oc = 8, 8
    for out_scale, act in ((4.0e4, "NONE"), (2.0e5, "RELU6"), (1.0e6, "RELU")):
        if op == "CONV_2D":
            filt = T((oc, 3, 3, c), scale=[0.01] * oc, data=rng.integers(-127, 128, size=(oc, 3, 3, c)).astype(np.int8))
            options = {"padding": "SAME", "fused_activation_function": act}
        else:
            filt = T((1, 3, 3, c), scale=[0.01] * c, data=rng.integers(-127, 128, size=(1, 3, 3, c)).astype(np.int8),
                     quantized_dimension=3)
            options = {"padding": "SAME", "depth_multiplier": 1, "fused_activation_function": act}
        model = build_model(op, [T((1, 6, 7, c), scale=0.05, zero_point=-7), filt,
                                 T((oc,), "int32", scale=[0.0005] * oc,
                                   data=rng.integers(-10**6, 10**6, oc).astype(np.int32))],
                            [T((1, 6, 7, oc), scale=out_scale * 1e-6, zero_point=5)], options)
        assert_bit_exact(model, random_input(model, rng), f"{op} out_scale={out_scale} {act}")


@pytest.mark.parametrize("h, w, c, mult, k, stride, dilation, padding, act, batch", [
    (8, 8, 1, 16, 3, 1, 1, "SAME", "RELU", 1),     # the demo's first layer: one input channel broadcast to 16
    (8, 8, 1, 6, 3, 1, 1, "SAME", "RELU6", 2),     # broadcast, partial last group, two images (plane refilled)
    (9, 7, 2, 8, 3, 2, 1, "SAME", "NONE", 1),      # multiplier a multiple of 4: groups share input channels
    (7, 9, 3, 3, 3, 1, 1, "SAME", "RELU", 1),      # groups mix input channels (gathered lanes)
    (10, 10, 2, 2, 5, 1, 2, "VALID", "NONE", 1),   # dilation, VALID
    (6, 11, 5, 2, 2, 2, 1, "SAME", "RELU_N1_TO_1", 2),  # even kernel, partial group, batch
    (70, 70, 1, 4, 3, 1, 1, "SAME", "RELU6", 1),   # padded plane > scratch limit: ring of rows, broadcast
    (66, 66, 2, 3, 3, 2, 1, "SAME", "RELU", 1),    # ring, stride 2, gathered lanes
    (40, 90, 1, 2, 3, 1, 2, "SAME", "NONE", 1),    # ring, dilation 2 (rows refilled)
])
def test_depthwise_conv_2d_depth_multiplier_blocked_path(h, w, c, mult, k, stride, dilation, padding, act, batch):
    """Depth multiplier > 1 with constant weights takes the blocked path (scratch planned from the shapes alone)
    and stays bit-exact, with and without bias, for zero points across int8."""
    rng = np.random.default_rng(h * 1000 + w * 10 + c * mult)
    oc = c * mult
    oh, ow = out_size(padding, h, k, stride, dilation), out_size(padding, w, k, stride, dilation)
    for in_zp, out_zp in ((-128, -128), (37, -5), (127, 100)):
        ws = [float(v) for v in (10 ** rng.uniform(-2.5, -1.5, size=oc))]
        wt = rng.integers(-127, 128, size=(1, k, k, oc)).astype(np.int8)
        inputs = [T((batch, h, w, c), scale=0.05, zero_point=in_zp),
                  T((1, k, k, oc), scale=ws, data=wt, quantized_dimension=3),
                  T((oc,), "int32", scale=[0.05 * s for s in ws], data=rng.integers(-4000, 4000, oc).astype(np.int32))]
        output = T((batch, oh, ow, oc), scale=0.01 * k, zero_point=out_zp)
        options = {"padding": padding, "stride_h": stride, "stride_w": stride, "dilation_h_factor": dilation,
                   "dilation_w_factor": dilation, "depth_multiplier": mult, "fused_activation_function": act}
        desc = f"dw {h}x{w}x{c} m={mult} k={k} s={stride} d={dilation} {padding} {act} zp=({in_zp},{out_zp})"
        model = build_model("DEPTHWISE_CONV_2D", inputs, [output], options)
        assert HostRuntime(model).plan["scratch"], desc + ": no scratch planned for the blocked path"
        assert_bit_exact(model, random_input(model, rng), desc)
        no_bias = build_model("DEPTHWISE_CONV_2D", inputs[:2], [output], options)
        assert_bit_exact(no_bias, random_input(no_bias, rng), desc + " no bias")


def test_depthwise_conv_2d_depth_multiplier_through_sanitized_runtime():
    """The depth-multiplier blocked path (plane with gathered and broadcast lanes, partial groups, batches; ring of
    rows) under ASan + UBSan: no out-of-bounds access, still exact."""
    rng = np.random.default_rng(29)
    for (h, w, c, mult, stride, batch) in ((6, 11, 5, 2, 2, 2), (8, 8, 1, 6, 1, 2), (66, 66, 2, 3, 2, 1),
                                           (70, 70, 1, 5, 1, 1)):
        oc = c * mult
        oh, ow = out_size("SAME", h, 3, stride, 1), out_size("SAME", w, 3, stride, 1)
        ws = [float(v) for v in (10 ** rng.uniform(-2.5, -1.5, size=oc))]
        model = build_model("DEPTHWISE_CONV_2D", [
            T((batch, h, w, c), scale=0.05, zero_point=-20),
            T((1, 3, 3, oc), scale=ws, data=rng.integers(-127, 128, size=(1, 3, 3, oc)).astype(np.int8),
              quantized_dimension=3),
            T((oc,), "int32", scale=[0.05 * s for s in ws], data=rng.integers(-4000, 4000, oc).astype(np.int32))],
            [T((batch, oh, ow, oc), scale=0.03, zero_point=11)],
            {"padding": "SAME", "stride_h": stride, "stride_w": stride, "depth_multiplier": mult,
             "fused_activation_function": "RELU6"})
        x = random_input(model, rng)
        got = HostRuntime(model, sanitize=True).invoke(x)[0]
        assert np.array_equal(got, reference(model, x)[0]), f"dw {h}x{w}x{c} m={mult} s={stride} batch={batch}"
