"""PAD / PADV2, MAX_POOL_2D and AVERAGE_POOL_2D in row-streamed groups (firmware/runtime/src/ek_stream_group.c):
their row ranges bit-exact with LiteRT BUILTIN_REF in group models on the host and on QEMU mps2-an386; a strided
BlazeBlock (depthwise main branch + max-pool / channel-pad skip branch + ADD) streams as one group whatever the graph
order of its branches; PAD's overlap (its output just below its dying input)."""
from __future__ import annotations

import json
import shutil
from typing import List, Optional, Sequence, Tuple

import numpy as np
import pytest

from edgekit.firmware.host_runtime import HostRuntime
from tests.firmware.opmodels import T, build_graph, random_input, reference
from tests.firmware.test_stream_groups import _conv

needs_qemu = pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                                reason="qemu-system-arm or arm-none-eabi-gcc is not installed")

Shape = Tuple[int, int, int, int]


class Graph:
    """A small int8 graph under construction: tensors and ops in execution order."""

    def __init__(self, seed: int, x: Shape) -> None:
        self.rng = np.random.default_rng(seed)
        self.tensors: List[T] = [T(x, scale=0.05, zero_point=self.zp(), name="x")]
        self.ops: list = []
        self.tensors_last = 0  # strided_blaze_block: the branch's current tensor

    def zp(self) -> int:
        return int(self.rng.integers(-20, 20))

    def act(self, shape: Shape, scale: float, zero_point: Optional[int] = None) -> int:
        self.tensors.append(T(shape, scale=scale, zero_point=self.zp() if zero_point is None else zero_point))
        return len(self.tensors) - 1

    def conv(self, x: int, cout: int, k: int = 3, stride: int = 1, padding: str = "SAME") -> int:
        _, h, w, cin = self.tensors[x].shape
        oh, ow = ((h + stride - 1) // stride, (w + stride - 1) // stride) if padding == "SAME" else \
            ((h - k) // stride + 1, (w - k) // stride + 1)
        wt, bt = _conv(self.rng, cin, cout, k)
        self.tensors += [wt, bt]
        out = self.act((1, oh, ow, cout), 0.06)
        self.ops.append(("CONV_2D", [x, out - 2, out - 1], [out], {"padding": padding, "stride_w": stride,
                                                                   "stride_h": stride, "fused_activation_function": "RELU"}))
        return out

    def depthwise(self, x: int, k: int = 3, stride: int = 1, padding: str = "SAME") -> int:
        _, h, w, c = self.tensors[x].shape
        oh, ow = ((h + stride - 1) // stride, (w + stride - 1) // stride) if padding == "SAME" else \
            ((h - k) // stride + 1, (w - k) // stride + 1)
        scales = self.rng.uniform(0.002, 0.02, size=c).tolist()
        self.tensors += [T((1, k, k, c), scale=scales, zero_point=[0] * c, quantized_dimension=3,
                           data=self.rng.integers(-127, 128, size=(1, k, k, c)).astype(np.int8)),
                         T((c,), dtype="int32", scale=[0.05 * s for s in scales], zero_point=[0] * c,
                           data=self.rng.integers(-3000, 3000, size=c).astype(np.int32))]
        out = self.act((1, oh, ow, c), 0.06)
        self.ops.append(("DEPTHWISE_CONV_2D", [x, out - 2, out - 1], [out],
                         {"padding": padding, "stride_w": stride, "stride_h": stride, "depth_multiplier": 1,
                          "fused_activation_function": "NONE"}))
        return out

    def pool(self, op: str, x: int, k: int, stride: int, padding: str, act: str = "NONE") -> int:
        _, h, w, c = self.tensors[x].shape
        oh, ow = ((h + stride - 1) // stride, (w + stride - 1) // stride) if padding == "SAME" else \
            ((h - k) // stride + 1, (w - k) // stride + 1)
        q = self.tensors[x]
        out = self.act((1, oh, ow, c), q.scale, q.zero_point)  # pooling keeps its input's quantization
        self.ops.append((op, [x], [out], {"padding": padding, "stride_w": stride, "stride_h": stride,
                                          "filter_width": k, "filter_height": k, "fused_activation_function": act}))
        return out

    def pad(self, x: int, pads: Sequence[Tuple[int, int]], value: Optional[int] = None) -> int:
        """PAD (or PADV2 with a constant ``value``, quantized like the output) of [[0, 0], h, w, c]."""
        src = self.tensors[x]
        full = [(0, 0)] + [tuple(p) for p in pads]
        shape = tuple(s + a + b for s, (a, b) in zip(src.shape, full))
        self.tensors.append(T((4, 2), dtype="int32", scale=None, data=np.array(full, dtype=np.int32)))
        inputs = [x, len(self.tensors) - 1]
        if value is not None:
            self.tensors.append(T((1,), scale=src.scale, zero_point=src.zero_point, data=np.array([value], np.int8)))
            inputs.append(len(self.tensors) - 1)
        out = self.act(shape, src.scale, src.zero_point)  # values are moved, not rescaled
        self.ops.append(("PADV2" if value is not None else "PAD", inputs, [out], {}))
        return out

    def add(self, a: int, b: int) -> int:
        out = self.act(self.tensors[a].shape, 0.08)
        self.ops.append(("ADD", [a, b], [out], {"fused_activation_function": "RELU"}))
        return out

    def model(self, out: int) -> bytes:
        return build_graph(self.tensors, self.ops, [0], [out])


def conv_middle_conv(seed: int, middle: str) -> bytes:
    """X -> conv 3x3 (16 -> 64 channels) -> <middle op> -> conv 3x3 (-> 16) -> Z: the middle op's row range inside a
    group (the wide intermediates make streaming pay)."""
    g = Graph(seed, (1, 33, 16, 16))
    t = g.conv(0, 64)
    if middle == "max 2x2/2 valid":
        t = g.pool("MAX_POOL_2D", t, 2, 2, "VALID")
    elif middle == "max 3x3/2 same":
        t = g.pool("MAX_POOL_2D", t, 3, 2, "SAME", act="RELU6")
    elif middle == "avg 3x3/1 same":
        t = g.pool("AVERAGE_POOL_2D", t, 3, 1, "SAME")
    elif middle == "avg 3x3/2 same":
        t = g.pool("AVERAGE_POOL_2D", t, 3, 2, "SAME")
    elif middle == "pad hwc":  # rows in the top and bottom padding read no input row
        t = g.pad(t, [(2, 3), (1, 0), (0, 16)])
    elif middle == "pad channels":
        t = g.pad(t, [(0, 0), (0, 0), (8, 8)])
    elif middle == "padv2 h":
        t = g.pad(t, [(1, 2), (0, 0), (0, 0)], value=7)
    else:
        raise ValueError(middle)
    return g.model(g.conv(t, 16))


def pad_then_strided_depthwise(seed: int) -> bytes:
    """MediaPipe's explicit padding before a stride-2 VALID depthwise: X -> conv -> PAD (bottom, right) -> depthwise
    3x3/2 VALID -> 1x1 conv -> Z."""
    g = Graph(seed, (1, 32, 24, 16))
    t = g.pad(g.conv(0, 64), [(0, 1), (0, 1), (0, 0)])
    return g.model(g.conv(g.depthwise(t, 3, 2, "VALID"), 16, k=1))


def strided_blaze_block(seed: int, order: str, h: int = 16, w: int = 12, c: int = 16, c2: int = 32) -> bytes:
    """BlazeFace's strided BlazeBlock: X -> depthwise 3x3/2 -> 1x1 conv (c -> c2); X -> max-pool 2x2/2 -> PAD of the
    channels (c -> c2); ADD -> Z. ``order``: the graph order of the branch ops (all consecutive)."""
    g = Graph(seed, (1, h, w, c))
    steps = {"main": [lambda: g.depthwise(0, 3, 2), lambda: g.conv(g.tensors_last, c2, k=1)],
             "skip": [lambda: g.pool("MAX_POOL_2D", 0, 2, 2, "VALID"),
                      lambda: g.pad(g.tensors_last, [(0, 0), (0, 0), (0, c2 - c)])]}
    outs = {}
    plan = {"main first": ["main", "main", "skip", "skip"], "skip first": ["skip", "skip", "main", "main"],
            "interleaved": ["main", "skip", "main", "skip"]}[order]  # interleaved: face_detection_short_range's
    done = {"main": 0, "skip": 0}
    for branch in plan:
        g.tensors_last = outs.get(branch, 0)
        outs[branch] = steps[branch][done[branch]]()
        done[branch] += 1
    return g.model(g.add(outs["skip"], outs["main"]))


def _members(rt: HostRuntime) -> List[str]:
    return [name for g in rt.prepared["streamed_groups"] for name in rt.op_names[g["first_op"]:g["last_op"] + 1]]


def _assert_exact(rt: HostRuntime, model: bytes, seed: int, what: str, n: int = 3) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(n):
        x = random_input(model, rng)
        got, want = rt.invoke(x), reference(model, x)
        assert all(np.array_equal(a, b) for a, b in zip(got, want)), what


MIDDLES = ["max 2x2/2 valid", "max 3x3/2 same", "avg 3x3/1 same", "avg 3x3/2 same", "pad hwc", "pad channels",
           "padv2 h"]


@pytest.mark.parametrize("middle", MIDDLES)
def test_pad_and_pooling_row_ranges_stream_bit_exact_with_builtin_ref(middle):
    model = conv_middle_conv(500 + MIDDLES.index(middle), middle)
    plain = HostRuntime(model)
    for mode in ("balanced", "ram"):
        rt = HostRuntime(model, optimize=mode)
        groups = rt.prepared["streamed_groups"]
        assert [(g["first_op"], g["last_op"]) for g in groups] == [(0, 2)], (mode, groups)  # conv, middle, conv
        _assert_exact(rt, model, MIDDLES.index(middle), f"{middle} {mode}")
        assert rt.prepared["arena_bytes"] < plain.plan["arena_bytes"], mode


def test_explicit_pad_before_a_strided_depthwise_streams():
    model = pad_then_strided_depthwise(520)
    rt = HostRuntime(model, optimize="ram")
    assert {"PAD", "DEPTHWISE_CONV_2D"} <= set(_members(rt)), rt.prepared["streamed_groups"]
    _assert_exact(rt, model, 1, "pad -> depthwise ram")
    balanced = HostRuntime(model, optimize="balanced")  # the depthwise's row range runs on its blocked path
    assert {"PAD", "DEPTHWISE_CONV_2D"} <= set(_members(balanced)), balanced.prepared["streamed_groups"]
    _assert_exact(balanced, model, 2, "pad -> depthwise balanced")


@pytest.mark.parametrize("order", ["main first", "skip first", "interleaved"])
def test_strided_blaze_block_is_one_group_whatever_its_branch_order(order):
    model = strided_blaze_block(530, order)
    rt = HostRuntime(model, optimize="ram")
    assert [(g["first_op"], g["last_op"]) for g in rt.prepared["streamed_groups"]] == [(0, 4)], rt.prepared
    assert sorted(_members(rt)) == sorted(["DEPTHWISE_CONV_2D", "CONV_2D", "MAX_POOL_2D", "PAD", "ADD"])
    _assert_exact(rt, model, 3, f"blaze block {order} ram")
    # X, Z and one region: less than X + the block's two widest intermediates op by op
    assert rt.prepared["arena_bytes"] < HostRuntime(model, optimize="speed").prepared["arena_bytes"]
    _assert_exact(HostRuntime(model, optimize="balanced"), model, 4, f"blaze block {order} balanced")


def test_a_pad_of_the_batch_does_not_stream():
    # a PAD that adds a batch: output row r is not one input row any more, so conv + PAD stay op by op
    g = Graph(540, (1, 8, 8, 16))
    t = g.conv(0, 16)
    src = g.tensors[t]
    g.tensors.append(T((4, 2), dtype="int32", scale=None, data=np.array([[0, 1], [0, 0], [0, 0], [0, 0]], np.int32)))
    pads = len(g.tensors) - 1
    out = g.act((2, 8, 8, 16), src.scale, src.zero_point)
    g.ops.append(("PAD", [t, pads], [out], {}))
    model = g.model(out)
    rt = HostRuntime(model, optimize="ram")
    assert "PAD" not in _members(rt)
    _assert_exact(rt, model, 5, "batch pad")


def test_channel_pad_sits_just_below_its_dying_input():
    """PAD's overlap (rows in order, each written below its input row): a channel pad 24 -> 28 of a dying input
    needs the output's bytes plus at most one row of slack, not input + output."""
    g = Graph(550, (1, 16, 16, 24))
    t = g.conv(0, 24, k=1)
    p = g.pad(t, [(0, 0), (0, 0), (0, 4)])
    model = g.model(g.conv(p, 16, k=1))
    rt = HostRuntime(model, optimize="speed")  # no groups: the overlap alone
    assert any(o["op"] == 1 and o["input"] == 0 for o in rt.prepared["overlaps"]), rt.prepared["overlaps"]
    padded = 16 * 16 * 28
    d = next(o["d_max"] for o in rt.prepared["overlaps"] if o["op"] == 1)
    assert d == -((4 * 255 + 28 + 15) // 16 * 16)  # min over rows r < 256 of 24 r - 28 (r + 1), rounded down to 16 B
    tensors = {t_["index"]: t_ for t_ in rt.prepared["plan"]["tensors"]}
    pad_in, pad_out = (tensors[i] for i in (g.ops[1][1][0], g.ops[1][2][0]))
    assert pad_out["offset"] + padded <= pad_in["offset"] + pad_in["bytes"] or \
        pad_out["offset"] >= pad_in["offset"] + pad_in["bytes"], "PAD output overlaps its input beyond d_max"
    assert pad_in["offset"] - pad_out["offset"] <= -d or pad_out["offset"] >= pad_in["offset"] + pad_in["bytes"]
    _assert_exact(rt, model, 6, "channel pad overlap")


def device_group_model(seed: int = 560) -> bytes:
    """Every new row range in one model: a strided BlazeBlock in face_detection_short_range's op order (depthwise,
    max-pool, 1x1 conv, channel PAD, ADD), then conv -> PAD (h, w, c) -> average-pool 3x3/2 SAME -> conv."""
    g = Graph(seed, (1, 32, 16, 32))
    d = g.depthwise(0, 3, 2)
    m = g.pool("MAX_POOL_2D", 0, 2, 2, "VALID")
    c = g.conv(d, 64, k=1)
    p = g.pad(m, [(0, 0), (0, 0), (0, 32)])
    t = g.conv(g.add(p, c), 16)
    t = g.pool("AVERAGE_POOL_2D", g.pad(t, [(1, 2), (1, 3), (0, 16)]), 3, 2, "SAME")
    return g.model(g.conv(t, 16))


def test_device_group_model_streams_its_pads_and_pools_on_the_host():
    model = device_group_model()
    rt = HostRuntime(model, optimize="ram")
    assert {"PAD", "MAX_POOL_2D", "AVERAGE_POOL_2D"} <= set(_members(rt)), rt.prepared["streamed_groups"]
    _assert_exact(rt, model, 7, "device group model ram")


@pytest.mark.slow
@needs_qemu
def test_pad_and_pooling_row_ranges_are_bit_exact_on_cortex_m4_in_qemu(tmp_path, cli):
    model = tmp_path / "groups.tflite"
    model.write_bytes(device_group_model())
    fw = tmp_path / "fw"
    assert cli("firmware", model, "--board", "mps2-an386", "--build", "-o", fw, "--optimize", "ram") == 0
    info = json.loads((fw / "firmware.json").read_text())
    groups = info["plan"]["streamed_groups"]
    names = {n for g in groups for n in g["op_names"]}
    assert {"PAD", "MAX_POOL_2D", "AVERAGE_POOL_2D", "DEPTHWISE_CONV_2D"} <= names, groups
    out = tmp_path / "run"
    assert cli("run", fw, "--device", "qemu:mps2-an386", "-n", "2", "-o", out) == 0
    exact = json.loads((out / "run.json").read_text())["outputs_bit_exact"]
    assert exact["bit_exact"] is True and exact["differing_elements"] == 0 and exact["total_elements"] > 0
