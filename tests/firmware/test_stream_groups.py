"""Row-streamed op groups (firmware/runtime/src/ek_stream_group.c): residual blocks run row by row with a few rows
of each intermediate tensor in RAM, bit-exact with LiteRT BUILTIN_REF; the device rejects a group record it cannot
bound; the planner only streams where it makes the arena smaller."""
from __future__ import annotations

import struct
from typing import List, Tuple

import numpy as np
import pytest

from edgekit.firmware.host_runtime import HostRuntime, prepared_init_error, streamed_groups
from tests.firmware.opmodels import T, build_graph, random_input, reference

IC = "ic_resnet8_int8.tflite"


def _conv(rng: np.random.Generator, cin: int, cout: int, k: int) -> Tuple[T, T]:
    w = rng.integers(-127, 128, size=(cout, k, k, cin)).astype(np.int8)
    scales = (rng.uniform(0.002, 0.02, size=cout)).tolist()
    b = rng.integers(-3000, 3000, size=cout).astype(np.int32)
    bias_scales = [0.05 * s for s in scales]  # input scale x weight scale
    return (T((cout, k, k, cin), scale=scales, zero_point=[0] * cout, data=w),
            T((cout,), dtype="int32", scale=bias_scales, zero_point=[0] * cout, data=b))


def residual_block(seed: int, *, stride: int, h: int, w: int, c: int, k: int = 3, padding: str = "SAME",
                   act: str = "RELU") -> bytes:
    """X -> conv(k, stride) -> conv(k) -> (+ X, or + 1x1 stride conv of X when the shape changes) -> Z."""
    rng = np.random.default_rng(seed)
    c2 = c if stride == 1 else 2 * c
    oh, ow = (h + stride - 1) // stride, (w + stride - 1) // stride
    tensors: List[T] = [T((1, h, w, c), scale=0.05, zero_point=int(rng.integers(-20, 20)), name="x")]
    wa, ba = _conv(rng, c, c2, k)
    wb, bb = _conv(rng, c2, c2, k)
    tensors += [wa, ba, T((1, oh, ow, c2), scale=0.06, zero_point=int(rng.integers(-20, 20)), name="t"),
                wb, bb, T((1, oh, ow, c2), scale=0.07, zero_point=int(rng.integers(-20, 20)), name="y")]
    opts = lambda s: {"padding": padding, "stride_w": s, "stride_h": s, "fused_activation_function": act}  # noqa: E731
    ops = [("CONV_2D", [0, 1, 2], [3], opts(stride)), ("CONV_2D", [3, 4, 5], [6], opts(1))]
    if stride == 1:
        tensors.append(T((1, oh, ow, c2), scale=0.08, zero_point=int(rng.integers(-20, 20)), name="z"))
        ops.append(("ADD", [0, 6], [7], {"fused_activation_function": "NONE"}))
        out = 7
    else:
        ws, bs = _conv(rng, c, c2, 1)
        tensors += [ws, bs, T((1, oh, ow, c2), scale=0.05, zero_point=0, name="s"),
                    T((1, oh, ow, c2), scale=0.08, zero_point=int(rng.integers(-20, 20)), name="z")]
        ops += [("CONV_2D", [0, 7, 8], [9], opts(stride)), ("ADD", [6, 9], [10], {"fused_activation_function": "RELU"})]
        out = 10
    return build_graph(tensors, ops, [0], [out])


CASES = [dict(stride=1, h=12, w=8, c=16), dict(stride=2, h=16, w=12, c=16), dict(stride=1, h=9, w=5, c=16, k=5),
         dict(stride=2, h=11, w=7, c=16, act="NONE"), dict(stride=1, h=10, w=10, c=32, padding="SAME", k=1)]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_residual_blocks_stream_bit_exact_with_builtin_ref(case):
    model = residual_block(100 + case, **CASES[case])
    rng = np.random.default_rng(case)
    for mode in ("balanced", "ram"):
        rt = HostRuntime(model, optimize=mode)
        groups = rt.prepared["streamed_groups"]
        assert groups and groups[0]["first_op"] == 0, (mode, groups)
        assert all(0 < w["rows"] for g in groups for w in g["windows"])
        for _ in range(3):
            x = random_input(model, rng)
            assert np.array_equal(rt.invoke(x)[0], reference(model, x)[0]), mode
        # the intermediates are not in the arena: a smaller arena than the op-by-op plan of the same mode's kernels
        assert rt.prepared["arena_bytes"] < HostRuntime(model).plan["arena_bytes"]


def test_speed_mode_does_not_stream():
    model = residual_block(7, **CASES[0])
    assert HostRuntime(model, optimize="speed").prepared["streamed_groups"] == []


def test_ic_streams_its_residual_blocks_below_half_the_tflm_arena(mlperf):
    model = (mlperf / IC).read_bytes()
    plain = HostRuntime(model)
    rt = HostRuntime(model, optimize="balanced")
    groups = rt.prepared["streamed_groups"]
    # the third block's group (ops 8-11) leaves the arena as it is: balanced drops it (ram keeps it)
    assert [(g["first_op"], g["last_op"]) for g in groups] == [(0, 3), (4, 7)]
    ram = HostRuntime(model, optimize="ram")
    assert [(g["first_op"], g["last_op"]) for g in ram.prepared["streamed_groups"]] == [(0, 3), (4, 7), (8, 11)]
    assert ram.prepared["arena_bytes"] == rt.prepared["arena_bytes"]
    assert rt.prepared["arena_bytes"] + 600 <= 27_176  # + the device's mutable state; 0.5x TFLM's 54,352 B arena
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = [rng.integers(-128, 128, size=(1, 32, 32, 3), dtype=np.int8)]
        assert np.array_equal(rt.invoke(x)[0], plain.invoke(x)[0])


def _fnv1a(data: bytes, h: int = 2166136261) -> int:
    for byte in data:
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return h


def _resealed(blob: bytearray) -> bytes:
    """The blob with its checksum recomputed (ek_prepared.c blob_checksum): an attacker's or a buggy tool's blob."""
    blob[12:16] = b"\0\0\0\0"
    struct.pack_into("<I", blob, 12, _fnv1a(bytes(blob)))
    return bytes(blob)


def test_a_group_record_the_device_cannot_bound_is_rejected_even_with_a_valid_checksum():
    model = residual_block(11, **CASES[1])
    blob = HostRuntime(model, optimize="balanced").prepared["blob"]
    assert prepared_init_error(model, blob) is None and streamed_groups(blob)
    ops_off, rec = struct.unpack_from("<I", blob, 4 * 12)[0], struct.unpack_from("<I", blob, 4 * 19)[0]
    member = ops_off + rec  # op 1: the group's first later op; its scratch_off holds the window rows of op 0's output
    shrunk = bytearray(blob)
    struct.pack_into("<i", shrunk, member + rec - 12, 1)
    assert "window too small" in prepared_init_error(model, _resealed(shrunk))
    orphan = bytearray(blob)
    struct.pack_into("<i", orphan, ops_off + rec - 4, 0)  # the first op no longer starts the group
    assert "without its group" in prepared_init_error(model, _resealed(orphan))
    too_long = bytearray(blob)
    struct.pack_into("<i", too_long, ops_off + rec - 4, 40)
    assert "bad row-streamed group" in prepared_init_error(model, _resealed(too_long))


def conv_prelu_chain(seed: int, *, h: int, w: int, c: int, stride: int = 1, expand: int = 4, alpha_shape=None) -> bytes:
    """X -> conv(3x3, stride, c -> expand*c) -> PRELU -> conv(3x3, back to c) -> PRELU -> Z, alphas per channel
    (MediaPipe's PRELU after every convolution)."""
    rng = np.random.default_rng(seed)
    oh, ow = (h + stride - 1) // stride, (w + stride - 1) // stride
    tensors: List[T] = [T((1, h, w, c), scale=0.05, zero_point=int(rng.integers(-20, 20)), name="x")]
    ops = []
    cur = 0
    for i, (s, cin, cout) in enumerate(((stride, c, expand * c), (1, expand * c, c))):
        shape = alpha_shape(oh, ow, cout) if alpha_shape else (1, 1, cout)
        wt, bt = _conv(rng, cin, cout, 3)
        alpha = T(shape, scale=0.004, zero_point=int(rng.integers(-10, 10)),
                  data=rng.integers(-128, 128, size=shape).astype(np.int8))
        base = len(tensors)
        tensors += [wt, bt, T((1, oh, ow, cout), scale=0.06, zero_point=int(rng.integers(-20, 20)), name=f"t{i}"), alpha,
                    T((1, oh, ow, cout), scale=0.05, zero_point=int(rng.integers(-20, 20)), name=f"p{i}")]
        ops += [("CONV_2D", [cur, base, base + 1], [base + 2],
                 {"padding": "SAME", "stride_w": s, "stride_h": s, "fused_activation_function": "NONE"}),
                ("PRELU", [base + 2, base + 3], [base + 4], {})]
        cur = base + 4
    return build_graph(tensors, ops, [0], [cur])


PRELU_CASES = [dict(h=12, w=8, c=16), dict(h=16, w=12, c=16, expand=2),
               dict(h=9, w=4, c=16, alpha_shape=lambda h, w, c: (c,)),
               dict(h=10, w=6, c=16, alpha_shape=lambda h, w, c: (1, 1, 1))]


@pytest.mark.parametrize("case", range(len(PRELU_CASES)))
def test_prelu_joins_row_streamed_groups_bit_exact_with_builtin_ref(case):
    model = conv_prelu_chain(200 + case, **PRELU_CASES[case])
    rng = np.random.default_rng(case)
    plain = HostRuntime(model)
    for mode in ("balanced", "ram"):
        rt = HostRuntime(model, optimize=mode)
        groups = rt.prepared["streamed_groups"]
        assert groups, mode
        members = [op for g in groups for op in range(g["first_op"], g["last_op"] + 1)]
        assert 1 in members or 3 in members, (mode, groups)  # a PRELU (ops 1 and 3) runs row by row in a group
        for _ in range(3):
            x = random_input(model, rng)
            assert np.array_equal(rt.invoke(x)[0], reference(model, x)[0]), mode
        assert rt.prepared["arena_bytes"] < plain.plan["arena_bytes"], mode


def test_prelu_whose_alpha_varies_along_rows_does_not_stream():
    # alpha [H, W, C]: each row has its own alphas, not the per-channel row contract: the PRELUs stay op by op
    model = conv_prelu_chain(300, h=6, w=4, c=16, alpha_shape=lambda h, w, c: (h, w, c))
    rt = HostRuntime(model, optimize="ram")
    members = [op for g in rt.prepared["streamed_groups"] for op in range(g["first_op"], g["last_op"] + 1)]
    assert 1 not in members and 3 not in members, rt.prepared["streamed_groups"]
    x = random_input(model, np.random.default_rng(0))
    assert np.array_equal(rt.invoke(x)[0], reference(model, x)[0])


def blaze_block(seed: int, *, h: int, w: int, c: int, k: int = 3, stride: int = 1, multiplier: int = 1) -> bytes:
    """MediaPipe's residual block: X -> depthwise(k) -> 1x1 conv -> (+ X) -> PRELU -> Z (stride 1), or
    X -> depthwise(k, stride 2) -> 1x1 conv -> PRELU (stride 2), all int8."""
    rng = np.random.default_rng(seed)
    oh, ow = (h + stride - 1) // stride, (w + stride - 1) // stride
    cm = c * multiplier
    dw = rng.integers(-127, 128, size=(1, k, k, cm)).astype(np.int8)
    dws = rng.uniform(0.002, 0.02, size=cm).tolist()
    tensors: List[T] = [T((1, h, w, c), scale=0.05, zero_point=int(rng.integers(-20, 20)), name="x"),
                        T((1, k, k, cm), scale=dws, zero_point=[0] * cm, data=dw, quantized_dimension=3),
                        T((cm,), dtype="int32", scale=[0.05 * s for s in dws], zero_point=[0] * cm,
                          data=rng.integers(-3000, 3000, size=cm).astype(np.int32)),
                        T((1, oh, ow, cm), scale=0.06, zero_point=int(rng.integers(-20, 20)), name="d")]
    wc, bc = _conv(rng, cm, c, 1)
    tensors += [wc, bc, T((1, oh, ow, c), scale=0.05, zero_point=int(rng.integers(-20, 20)), name="t")]
    ops = [("DEPTHWISE_CONV_2D", [0, 1, 2], [3], {"padding": "SAME", "stride_w": stride, "stride_h": stride,
                                                  "depth_multiplier": multiplier, "fused_activation_function": "NONE"}),
           ("CONV_2D", [3, 4, 5], [6], {"padding": "SAME", "stride_w": 1, "stride_h": 1,
                                        "fused_activation_function": "NONE"})]
    cur = 6
    if stride == 1 and multiplier == 1:
        tensors.append(T((1, oh, ow, c), scale=0.08, zero_point=int(rng.integers(-20, 20)), name="s"))
        ops.append(("ADD", [0, 6], [7], {"fused_activation_function": "NONE"}))
        cur = 7
    alpha = T((1, 1, c), scale=0.004, zero_point=int(rng.integers(-10, 10)),
              data=rng.integers(-128, 128, size=(1, 1, c)).astype(np.int8))
    tensors += [alpha, T((1, oh, ow, c), scale=0.05, zero_point=int(rng.integers(-20, 20)), name="z")]
    ops.append(("PRELU", [cur, len(tensors) - 2], [len(tensors) - 1], {}))
    return build_graph(tensors, ops, [0], [len(tensors) - 1])


BLAZE_CASES = [dict(h=12, w=8, c=16), dict(h=16, w=12, c=16, stride=2, multiplier=4), dict(h=9, w=4, c=16, k=5),
               dict(h=10, w=6, c=16, multiplier=2)]


@pytest.mark.parametrize("case", range(len(BLAZE_CASES)))
def test_depthwise_and_prelu_blocks_stream_in_ram_mode_bit_exact_with_builtin_ref(case):
    model = blaze_block(400 + case, **BLAZE_CASES[case])
    rng = np.random.default_rng(case)
    plain = HostRuntime(model)
    rt = HostRuntime(model, optimize="ram")
    groups = rt.prepared["streamed_groups"]
    assert groups and groups[0]["first_op"] == 0, groups  # the DEPTHWISE_CONV_2D is op 0
    for _ in range(3):
        x = random_input(model, rng)
        assert np.array_equal(rt.invoke(x)[0], reference(model, x)[0])
    assert rt.prepared["arena_bytes"] < plain.plan["arena_bytes"]
    # balanced streams the depthwise too: its row range runs on the blocked path (ek_dw_rows_fast)
    balanced = HostRuntime(model, optimize="balanced")
    groups = balanced.prepared["streamed_groups"]
    assert groups and groups[0]["first_op"] == 0, groups
    x = random_input(model, rng)
    assert np.array_equal(balanced.invoke(x)[0], reference(model, x)[0])
