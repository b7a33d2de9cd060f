"""FULLY_CONNECTED's int8-weight path (FC_PATH_INT8: the weights stay int8, SXTB16 on the fly on Cortex-M4), taken
when a prepared model keeps its weights int8 (`--weights int8`, HostRuntime(flash_layouts=False)) and by plans for
Helium, bit-exact against LiteRT BUILTIN_REF: seeded random shapes (depth not a multiple of 4, units not a multiple
of 4, batches, per-tensor / per-channel scales, bias or none, every fused activation) on the host build of the C
runtime, and a chain of such layers through `edgekit firmware --weights int8 --build` on QEMU mps2-an386 (the
Cortex-M4 assembly), with firmware.json's figures of what is in flash."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from edgekit.firmware.constants import compact_constants, unread_constants
from edgekit.firmware.host_runtime import HostRuntime
from tests.firmware.opmodels import T, build_graph, build_model, random_input, reference
from tests.firmware.test_constants import _runtime_over
from tests.firmware.test_kernels_conv import fc_case

needs_qemu = pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                                reason="qemu-system-arm or arm-none-eabi-gcc is not installed")


def _assert_same(model: bytes, rt: HostRuntime, x, what: str) -> None:
    for want, got in zip(reference(model, x), rt.invoke(x)):
        assert got.shape == want.shape and np.array_equal(got, want), f"{what}: {int(np.count_nonzero(got != want))} differ"


@pytest.mark.parametrize("seed", range(3))
def test_int8_weight_fully_connected_is_bit_exact(seed):
    """Every case on the int8-weight plan (compacted constants re-bound, as the device binds them), the packed plan
    and a Helium plan run on this host (a Helium-planned blob has no packed weights: its FC takes the int8 path)."""
    rng = np.random.default_rng(5100 + seed)
    for case in range(25):
        inputs, output, options, desc = fc_case(rng)
        model = build_model("FULLY_CONNECTED", inputs, [output], options)
        x = random_input(model, rng)
        mode = ("speed", "balanced", "ram")[case % 3]
        rt = HostRuntime(model, optimize=mode, flash_layouts=False)
        int8_blob = rt.prepared["blob"]
        c = compact_constants(model, int8_blob)
        _runtime_over(model, rt, c.data, c.blob)
        _assert_same(model, rt, x, f"{desc} int8 weights {mode}")
        packed = HostRuntime(model, optimize=mode)
        _assert_same(model, packed, x, f"{desc} packed {mode}")
        _assert_same(model, HostRuntime(model, optimize=mode, plan_mve=True), x, f"{desc} Helium plan {mode}")
        w_zp, depth = inputs[1].zero_point, inputs[1].shape[1]
        if w_zp == 0 and depth >= 4:  # the packed path's int16 copy is what the int8 path does without
            assert len(int8_blob) < len(packed.prepared["blob"]), desc
        if w_zp == 0 and inputs[2] is not None:  # the bias lives in the folds: its original is left out
            assert unread_constants(int8_blob)[0] >= 1, desc


def test_packed_weights_leave_their_originals_out_when_the_depth_is_whole_groups_of_4():
    """Packed FC reads the original int8 weights only for the last depth % 4 inputs: with depth % 4 == 0 no op reads
    them (EKP_UNREAD) and the compacted constants do not keep them; with a tail they stay."""
    rng = np.random.default_rng(77)
    for depth, dropped in ((16, 2), (18, 1)):
        wt = rng.integers(-127, 128, size=(6, depth)).astype(np.int8)
        model = build_model("FULLY_CONNECTED", [T((2, depth), scale=0.05, zero_point=3),
                                                T((6, depth), scale=0.01, data=wt),
                                                T((6,), "int32", scale=0.0005, data=np.arange(6, dtype=np.int32))],
                            [T((2, 6), scale=0.1, zero_point=-2)])
        rt = HostRuntime(model, optimize="balanced")
        assert unread_constants(rt.prepared["blob"]) == (dropped, (6 * depth if dropped == 2 else 0) + 24)
        c = compact_constants(model, rt.prepared["blob"])
        assert (len(c.data) < wt.size) == (dropped == 2)
        _runtime_over(model, rt, c.data, c.blob)
        _assert_same(model, rt, random_input(model, rng), f"packed depth {depth}")


def fc_chain(seed: int = 29) -> bytes:
    """Five FULLY_CONNECTED layers, batches 2: depths 13, 37, 64, 6, 7 (tails of 1-3 inputs and none), units 37, 64,
    6, 7, 5 (partial quads), per-tensor and per-channel scales, bias and none, RELU / RELU6 / NONE."""
    rng = np.random.default_rng(seed)
    sizes = [13, 37, 64, 6, 7, 5]
    tensors = [T((2, sizes[0]), scale=0.05, zero_point=-7)]
    ops = []
    for k, (depth, units) in enumerate(zip(sizes, sizes[1:])):
        per_channel = k % 2 == 1
        ws = [float(0.004 * (1 + (j % 5))) for j in range(units)] if per_channel else 0.006
        s_in = tensors[-1].scale
        wt = rng.integers(-127, 128, size=(units, depth)).astype(np.int8)
        w_i = len(tensors)
        tensors.append(T((units, depth), scale=ws, data=wt))
        inputs = [w_i - 1, w_i]
        if k != 2:
            bscale = [float(np.float32(s_in) * np.float32(s)) for s in ws] if per_channel else \
                float(np.float32(s_in) * np.float32(ws))
            tensors.append(T((units,), "int32", scale=bscale, data=rng.integers(-3000, 3000, (units,)).astype(np.int32)))
            inputs.append(len(tensors) - 1)
        tensors.append(T((2, units), scale=float(s_in * 0.006 * np.sqrt(depth) * 3), zero_point=int(rng.integers(-20, 20))))
        ops.append(("FULLY_CONNECTED", inputs, [len(tensors) - 1],
                    {"fused_activation_function": ("RELU", "NONE", "RELU6", "NONE", "NONE")[k]}))
    return build_graph(tensors, ops, [0], [len(tensors) - 1])


def test_fc_chain_is_bit_exact_on_the_host_with_int8_weights():
    model = fc_chain()
    rt = HostRuntime(model, optimize="balanced", flash_layouts=False)
    for seed in range(3):
        _assert_same(model, rt, random_input(model, np.random.default_rng(seed)), "fc chain")


@pytest.mark.slow
@needs_qemu
def test_weights_int8_firmware_runs_bit_exact_on_cortex_m4_and_reports_its_flash(tmp_path, cli):
    """`edgekit firmware --weights int8 --build` (the int8 FC assembly compiled in: EK_NEED_FC_INT8) then `edgekit run`
    on QEMU mps2-an386: bit-exact; firmware.json says what is in flash, matching the linker map's figures."""
    model = tmp_path / "fc_chain.tflite"
    model.write_bytes(fc_chain())
    project = tmp_path / "fw"
    assert cli("firmware", model, "--board", "mps2-an386", "--weights", "int8", "--build", "-o", project) == 0
    defines = re.search(r"^DEFINES :=(.*)$", (project / "Makefile").read_text(), re.M).group(1).split()
    assert "-DEK_NEED_FC_INT8" in defines
    info = json.loads((project / "firmware.json").read_text())
    layouts, split = info["plan"]["weight_layouts"], info["flash"]["split"]
    assert layouts["flash_layouts"] is False and layouts["weights"] == "int8" and layouts["relaid_bytes"] == 0
    assert layouts["prepared_bytes"] == info["plan"]["prepared_bytes"]
    assert layouts["originals_dropped"] == 4  # the four biases, folded
    assert abs(split["model"] - layouts["constants_bytes"]) < 16 and abs(split["prepared"] - layouts["prepared_bytes"]) < 16
    weights = 13 * 37 + 37 * 64 + 64 * 6 + 6 * 7 + 7 * 5 + 12 * (64 + 7)  # + per-channel scales, zero points
    assert weights <= layouts["constants_bytes"] < weights + 16 * 40  # the int8 weights kept once, 16-byte aligned
    out = tmp_path / "run"
    assert cli("run", project, "--device", "qemu:mps2-an386", "-n", "2", "-o", out) == 0
    exact = json.loads((out / "run.json").read_text())["outputs_bit_exact"]
    assert exact["bit_exact"] is True and exact["differing_elements"] == 0 and exact["total_elements"] > 0


def test_an_unknown_weights_mode_is_one_clear_error(tmp_path, cli, capsys):
    from edgekit.errors import UserError
    from edgekit.firmware.generate import check_weights

    with pytest.raises(UserError, match="unknown --weights mode 'fast'"):
        check_weights("fast")
    model = tmp_path / "fc.tflite"
    model.write_bytes(fc_chain())
    with pytest.raises(SystemExit) as exc:
        cli("firmware", model, "--weights", "fast", "-o", tmp_path / "fw")
    assert exc.value.code != 0 and "--weights: invalid choice: 'fast'" in capsys.readouterr().err
    assert not (tmp_path / "fw").exists()
