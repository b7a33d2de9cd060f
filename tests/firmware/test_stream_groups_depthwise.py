"""DEPTHWISE_CONV_2D row ranges on the blocked paths (kernels/depthwise_conv_2d.c dw_blocked_rows): random small
models X -> 1x1 conv -> depthwise -> 1x1 conv -> Z with varied kernels (square or not), strides, SAME / VALID
padding, dilation, depth multipliers, channel counts (also not multiples of 4) and constant channels, streamed as one
group in the default balanced mode, bit-exact with LiteRT BUILTIN_REF. The depthwise's input is a window of a few
rows there, so a row range reading any input row outside the ones it needs would read other rows' bytes."""
from __future__ import annotations

import json
import shutil
from typing import Dict, List

import numpy as np
import pytest

from edgekit.firmware.host_runtime import HostRuntime
from edgekit.firmware.kernel_paths import DW_ROWS, group_paths
from tests.firmware.opmodels import T, build_graph, random_input, reference
from tests.firmware.test_runtime_code_size import makefile_defines
from tests.firmware.test_stream_groups import _conv

needs_qemu = pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                                reason="qemu-system-arm or arm-none-eabi-gcc is not installed")

ACTIVATIONS = ("NONE", "RELU", "RELU6")


def _out_size(n: int, k: int, stride: int, dilation: int, padding: str) -> int:
    eff = (k - 1) * dilation + 1
    return (n + stride - 1) // stride if padding == "SAME" else (n - eff) // stride + 1


def random_case(rng: np.random.Generator) -> Dict:
    """Depthwise parameters whose group's intermediate rows keep 16-byte alignment (ek_stream_group.c's rule)."""
    while True:
        case = dict(h=int(rng.integers(6, 20)), w=int(rng.choice([8, 16])), c=int(rng.choice([3, 4, 5, 6, 8, 10, 12, 20])),
                    kh=int(rng.choice([1, 2, 3, 5])), kw=int(rng.choice([1, 3, 5])), stride=int(rng.choice([1, 1, 2, 3])),
                    dilation=int(rng.choice([1, 1, 1, 2, 3])), padding=str(rng.choice(["SAME", "VALID"])),
                    multiplier=int(rng.choice([1, 1, 1, 2, 4])), act=str(rng.choice(ACTIVATIONS)),
                    constants=int(rng.integers(0, 3)))
        if case["kh"] * case["kw"] == 1:
            continue
        oh = _out_size(case["h"], case["kh"], case["stride"], case["dilation"], case["padding"])
        ow = _out_size(case["w"], case["kw"], case["stride"], case["dilation"], case["padding"])
        cm = case["c"] * case["multiplier"]
        if oh < 2 or ow < 1 or (case["w"] * case["c"]) % 16 or (ow * cm) % 16:
            continue
        return case


def depthwise_model(seed: int, case: Dict) -> bytes:
    """X (c0 channels) -> 1x1 conv (-> c) -> depthwise (case) -> 1x1 conv (-> c0) -> Z. ``constants`` depthwise
    channels have all-zero weights (one output value whatever the input: ek_conv_constant_channels)."""
    rng = np.random.default_rng(seed)
    h, w, c, m = case["h"], case["w"], case["c"], case["multiplier"]
    kh, kw, s, dil = case["kh"], case["kw"], case["stride"], case["dilation"]
    cm = c * m
    oh = _out_size(h, kh, s, dil, case["padding"])
    ow = _out_size(w, kw, s, dil, case["padding"])
    c0 = 2
    zp = lambda: int(rng.integers(-20, 20))  # noqa: E731
    tensors: List[T] = [T((1, h, w, c0), scale=0.05, zero_point=zp(), name="x")]
    wt, bt = _conv(rng, c0, c, 1)
    tensors += [wt, bt, T((1, h, w, c), scale=0.06, zero_point=zp(), name="e")]
    dw = rng.integers(-127, 128, size=(1, kh, kw, cm)).astype(np.int8)
    dead = rng.choice(cm, size=min(case["constants"], cm), replace=False)
    dw[..., dead] = 0
    scales = rng.uniform(0.002, 0.02, size=cm).tolist()
    tensors += [T((1, kh, kw, cm), scale=scales, zero_point=[0] * cm, quantized_dimension=3, data=dw),
                T((cm,), dtype="int32", scale=[0.06 * sc for sc in scales], zero_point=[0] * cm,
                  data=rng.integers(-3000, 3000, size=cm).astype(np.int32)),
                T((1, oh, ow, cm), scale=0.07, zero_point=zp(), name="d")]
    wz, bz = _conv(rng, cm, c0, 1)
    tensors += [wz, bz, T((1, oh, ow, c0), scale=0.05, zero_point=zp(), name="z")]
    ops = [("CONV_2D", [0, 1, 2], [3], {"padding": "SAME", "stride_w": 1, "stride_h": 1,
                                        "fused_activation_function": "RELU"}),
           ("DEPTHWISE_CONV_2D", [3, 4, 5], [6], {"padding": case["padding"], "stride_w": s, "stride_h": s,
                                                  "dilation_w_factor": dil, "dilation_h_factor": dil,
                                                  "depth_multiplier": m, "fused_activation_function": case["act"]}),
           ("CONV_2D", [6, 7, 8], [9], {"padding": "SAME", "stride_w": 1, "stride_h": 1,
                                        "fused_activation_function": "NONE"})]
    return build_graph(tensors, ops, [0], [9])


def _members(rt: HostRuntime) -> List[str]:
    return [name for g in rt.prepared["streamed_groups"] for name in rt.op_names[g["first_op"]:g["last_op"] + 1]]


CASES = 24


@pytest.mark.parametrize("seed", range(CASES))
def test_depthwise_row_ranges_stream_in_balanced_mode_bit_exact_with_builtin_ref(seed):
    rng = np.random.default_rng(7000 + seed)
    case = random_case(rng)
    model = depthwise_model(7100 + seed, case)
    rt = HostRuntime(model, optimize="balanced")
    assert "DEPTHWISE_CONV_2D" in _members(rt), (case, rt.prepared["streamed_groups"])
    for _ in range(2):
        x = random_input(model, rng)
        got, want = rt.invoke(x), reference(model, x)
        assert np.array_equal(got[0], want[0]), (case, int(np.sum(got[0] != want[0])))


def test_the_fuzz_covers_the_row_path_variants():
    """The random cases span what the row path distinguishes: partial channel groups, depth multipliers, strides,
    dilation, VALID padding, constant channels, non-square kernels."""
    cases = [random_case(np.random.default_rng(7000 + seed)) for seed in range(CASES)]
    assert any(c["c"] * c["multiplier"] % 4 for c in cases)
    assert any(c["multiplier"] > 1 for c in cases) and any(c["stride"] > 1 for c in cases)
    assert any(c["dilation"] > 1 for c in cases) and any(c["padding"] == "VALID" for c in cases)
    assert any(c["constants"] > 0 for c in cases) and any(c["kh"] != c["kw"] for c in cases)


@pytest.mark.parametrize("geometry", ["plane", "ring", "ring dilated"])
def test_depthwise_row_ranges_in_each_scratch_geometry(geometry):
    """Plane geometry (the padded plane fits: any range is one chunk), ring geometry (2 * kh rows per chunk) and a
    dilated window wider than the ring (each output row's kh rows filled compactly)."""
    case = {"plane": dict(h=12, w=8, c=16, kh=3, kw=3, stride=1, dilation=1, padding="SAME", multiplier=1, act="RELU",
                          constants=1),
            "ring": dict(h=40, w=16, c=4, kh=3, kw=3, stride=1, dilation=1, padding="SAME", multiplier=1, act="NONE",
                         constants=0),
            "ring dilated": dict(h=40, w=16, c=4, kh=3, kw=3, stride=1, dilation=4, padding="SAME", multiplier=1,
                                 act="RELU6", constants=1)}[geometry]
    model = depthwise_model(7200, case)
    rt = HostRuntime(model, optimize="balanced")
    assert "DEPTHWISE_CONV_2D" in _members(rt), rt.prepared["streamed_groups"]
    rng = np.random.default_rng(7201)
    for _ in range(2):
        x = random_input(model, rng)
        assert np.array_equal(rt.invoke(x)[0], reference(model, x)[0]), geometry


def test_the_generator_compiles_the_row_paths_only_for_a_plan_that_groups_a_depthwise(tmp_path):
    """EK_NEED_DW_ROWS (kernel_paths.group_paths) from the prepared plan: set when a balanced group holds the
    depthwise, absent when the plan has no group (speed)."""
    from edgekit.firmware.generate import generate_firmware

    assert group_paths([["CONV_2D", "DEPTHWISE_CONV_2D"]]) == [DW_ROWS] and group_paths([["CONV_2D", "ADD"]]) == []
    model = tmp_path / "dw.tflite"
    model.write_bytes(depthwise_model(7300, dict(h=12, w=8, c=16, kh=3, kw=3, stride=1, dilation=1, padding="SAME",
                                                 multiplier=1, act="RELU", constants=0)))
    for mode, wanted in (("balanced", True), ("speed", False)):
        result = generate_firmware(model, "mps2-an386", tmp_path / mode, build=False, optimize=mode)
        groups = result.info.to_dict()["plan"]["streamed_groups"]
        assert ("DEPTHWISE_CONV_2D" in {n for g in groups for n in g["op_names"]}) is wanted, (mode, groups)
        assert (f"-D{DW_ROWS}" in makefile_defines(tmp_path / mode)) is wanted, mode


def mobilenet_blocks(seed: int = 7400) -> bytes:
    """X (1, 32, 24, 8) -> three inverted residual bodies (1x1 expand -> depthwise 3x3 (stride 1, 2, 1) -> 1x1
    project): every depthwise between two wide intermediates, as in MobileNet / MediaPipe."""
    rng = np.random.default_rng(seed)
    tensors: List[T] = [T((1, 32, 24, 8), scale=0.05, zero_point=int(rng.integers(-20, 20)), name="x")]
    ops: list = []
    cur, (h, w) = 0, (32, 24)
    for stride in (1, 2, 1):
        wt, bt = _conv(rng, 8, 48, 1)
        tensors += [wt, bt, T((1, h, w, 48), scale=0.06, zero_point=int(rng.integers(-20, 20)))]
        ops.append(("CONV_2D", [cur, len(tensors) - 3, len(tensors) - 2], [len(tensors) - 1],
                    {"padding": "SAME", "stride_w": 1, "stride_h": 1, "fused_activation_function": "RELU6"}))
        h, w = (h + stride - 1) // stride, (w + stride - 1) // stride
        scales = rng.uniform(0.002, 0.02, size=48).tolist()
        tensors += [T((1, 3, 3, 48), scale=scales, zero_point=[0] * 48, quantized_dimension=3,
                      data=rng.integers(-127, 128, size=(1, 3, 3, 48)).astype(np.int8)),
                    T((48,), dtype="int32", scale=[0.06 * s for s in scales], zero_point=[0] * 48,
                      data=rng.integers(-3000, 3000, size=48).astype(np.int32)),
                    T((1, h, w, 48), scale=0.07, zero_point=int(rng.integers(-20, 20)))]
        ops.append(("DEPTHWISE_CONV_2D", [len(tensors) - 4, len(tensors) - 3, len(tensors) - 2], [len(tensors) - 1],
                    {"padding": "SAME", "stride_w": stride, "stride_h": stride, "depth_multiplier": 1,
                     "fused_activation_function": "RELU6"}))
        wz, bz = _conv(rng, 48, 8, 1)
        tensors += [wz, bz, T((1, h, w, 8), scale=0.05, zero_point=int(rng.integers(-20, 20)))]
        ops.append(("CONV_2D", [len(tensors) - 4, len(tensors) - 3, len(tensors) - 2], [len(tensors) - 1],
                    {"padding": "SAME", "stride_w": 1, "stride_h": 1, "fused_activation_function": "NONE"}))
        cur = len(tensors) - 1
    return build_graph(tensors, ops, [0], [cur])


# Instructions of the balanced firmware (depthwise layers row-streamed) over the speed one (no groups), measured on
# QEMU: the row ranges refill each window's rows per channel group (kh / stride rows per output row instead of one)
# and rebuild their group tables per call. Measured 1.20x on mps2-an386 (4,722,389 vs 3,933,092 instructions) and
# 1.19x on mps3-an547 (Helium dw_blocked_rows_mve: 2,857,379 vs 2,392,413), arena 17,968 vs 44,080 B; the bound
# guards against the per-pixel loop's 3x coming back.
BALANCED_INSTRUCTION_LIMIT = 1.25


@pytest.mark.slow
@needs_qemu
def test_depthwise_row_ranges_on_cortex_m4_and_m55_are_bit_exact_and_cost_few_instructions(tmp_path, cli):
    model = tmp_path / "blocks.tflite"
    model.write_bytes(mobilenet_blocks())
    for board in ("mps2-an386", "mps3-an547"):  # DSP / portable row path, Helium row path
        counts = {}
        for mode in ("speed", "balanced"):
            fw = tmp_path / f"{board}-{mode}"
            assert cli("firmware", model, "--board", board, "--build", "-o", fw, "--optimize", mode) == 0
            groups = json.loads((fw / "firmware.json").read_text())["plan"]["streamed_groups"]
            assert ("DEPTHWISE_CONV_2D" in {n for g in groups for n in g["op_names"]}) is (mode == "balanced"), groups
            out = tmp_path / f"run-{board}-{mode}"
            assert cli("run", fw, "--device", f"qemu:{board}", "-n", "2", "-o", out) == 0
            run = json.loads((out / "run.json").read_text())
            exact = run["outputs_bit_exact"]
            assert exact["bit_exact"] is True and exact["differing_elements"] == 0 and exact["total_elements"] > 0
            counts[mode] = run["instructions_per_inference"]
        assert counts["balanced"] <= BALANCED_INSTRUCTION_LIMIT * counts["speed"], (board, counts)
