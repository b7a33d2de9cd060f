"""`edgekit firmware --board corstone-300-ethos-u55`: Vela for the profile's NPU, the model placed in NPU-visible memory
(16-byte aligned, checked in a linked ELF), the NPU arena sized from the compiled model, the CPU-fallback operators
checked against edgekit's runtime, and an honest "cannot run here" (no Ethos-U driver, no NPU, no FVP)."""
from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import run_cli

pytest.importorskip("ethosu.vela", reason="ethos-u-vela is not installed (pip install ethos-u-vela==5.2.0)")

from tests.test_vela_compile import conv_dequantize_model, conv_model  # noqa: E402

BOARD = "corstone-300-ethos-u55"
needs_gcc = pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc"), reason="arm-none-eabi-gcc is needed for the "
                               "placement-check link (apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi)")


def test_corstone_profile_validates_with_its_npu():
    from edgekit.firmware.boards import load_board, qemu_board_names
    from edgekit.firmware.ethosu import npu_profile

    board = load_board(BOARD)
    npu = npu_profile(board)
    assert board.core == "Cortex-M55" and board.connection["kind"] == "fvp" and BOARD not in qemu_board_names()
    assert (npu.accelerator, npu.system_config, npu.memory_mode) == ("ethos-u55-128", "Ethos_U55_High_End_Embedded",
                                                                     "Shared_Sram")
    regions = {r.name: r for r in board.extra_regions}
    assert regions[npu.model_region].origin == 0x70000000 and regions[npu.arena_region].origin == 0x31000000
    assert npu.base_address == 0x58102000 and npu.irq == 56


def _firmware(tmp_path, model):
    out = tmp_path / "fw"
    assert run_cli("firmware", model, "--board", BOARD, "-o", out) == 0
    return out, json.loads((out / "firmware.json").read_text())


@needs_gcc
def test_model_with_cpu_fallback_is_placed_and_not_pretended_to_run(tmp_path, capsys):
    from edgekit.firmware.support import check_support
    from edgekit.tflite_graph import read_graph

    out, info = _firmware(tmp_path, conv_dequantize_model(tmp_path / "conv_deq.tflite"))
    printed = capsys.readouterr().out
    assert info["runnable_here"] is False and info["build"]["built"] is False
    for needed in ("Ethos-U core driver", "Fixed Virtual Platform", "does not implement the CUSTOM 'ethos-u'"):
        assert needed in info["not_runnable_reason"] and needed in (out / "README.md").read_text()
    assert "NOT built or run" in printed
    # placement measured from the linked ELF: model in DDR (NPU-visible), 16-byte aligned; arena in SRAM
    pc = info["placement_check"]
    assert pc["linked"] and pc["ek_npu_model"]["region"] == "ddr" and pc["ek_npu_model"]["aligned_16"]
    assert pc["ek_npu_arena"]["region"] == "isram" and pc["ek_npu_arena"]["aligned_16"]
    vela_bytes = (out / "vela" / "model_vela.tflite").read_bytes()
    assert pc["ek_npu_model"]["bytes"] == len(vela_bytes) == info["vela_model"]["bytes"]
    assert pc["ek_npu_arena"]["bytes"] == info["arena"]["bytes"]
    # arena = Vela's scratch (its SRAM figure) + the ethos-u op's I/O tensors, each 16-byte aligned
    compile_info = json.loads((out / "vela" / "compile.json").read_text())
    arena = info["arena"]
    assert arena["scratch_bytes"] == compile_info["memory"]["sram_used_bytes"]
    assert arena["bytes"] == sum(-(-b // 16) * 16 for b in [arena["scratch_bytes"], arena["scratch_fast_bytes"]]
                                 + [t["bytes"] for t in arena["io_tensors"]])
    assert [t["name"] for t in arena["io_tensors"]] == ["in", "conv"]
    # the CPU-fallback op runs on edgekit's runtime; the ethos-u op cannot (said clearly)
    assert [(o["name"], o["runs_on"], o["supported"]) for o in info["ops"]] == [
        ("CUSTOM 'ethos-u'", "npu", True), ("DEQUANTIZE", "cpu", True)]
    assert info["cpu_fallback_reasons"][0]["reasons"] == ["Unsupported opType"]
    ours = check_support(read_graph(vela_bytes), "edgekit")
    assert ours.find("DEQUANTIZE").supported
    ethosu = ours.find("CUSTOM 'ethos-u'")
    assert not ethosu.supported and "custom operator 'ethos-u'" in ethosu.reason
    assert "estimated (Vela performance model, ethos-u55-128" in info["estimate"]["label"]
    header = (out / "model" / "ek_npu_config.h").read_text()
    assert f"#define EK_NPU_ARENA_BYTES {arena['bytes']}u" in header and "0x58102000u" in header
    assert 'section(".ek_npu_model")' in (out / "model" / "npu_model.c").read_text()


def test_cpu_operator_our_runtime_lacks_is_refused(tmp_path, capsys):
    import numpy as np

    from tests.firmware.opmodels import T, build_graph
    from tests.test_vela_compile import _conv_tensors

    conv_out = _conv_tensors()[3]
    tensors = _conv_tensors() + [T(conv_out.shape, scale=conv_out.scale, zero_point=conv_out.zero_point, name="lrn")]
    model = tmp_path / "conv_lrn.tflite"
    model.write_bytes(build_graph(tensors, [("CONV_2D", [0, 1, 2], [3], {"padding": "SAME"}),
                                            ("LOCAL_RESPONSE_NORMALIZATION", [3], [4], None)], [0], [4]))
    out = tmp_path / "fw"
    assert run_cli("firmware", model, "--board", BOARD, "-o", out) != 0
    err = capsys.readouterr().err
    assert "LOCAL_RESPONSE_NORMALIZATION" in err and "left on the CPU by Vela, and edgekit's runtime cannot run it" in err
    assert not out.exists()


@needs_gcc
@pytest.mark.slow
def test_mlperf_kws_on_corstone(tmp_path, mlperf):
    out, info = _firmware(tmp_path, mlperf / "kws_ref_model_int8.tflite")
    assert [o["name"] for o in info["ops"]] == ["CUSTOM 'ethos-u'"] and info["cpu_fallback_ops"] == []
    assert info["arena"]["bytes"] >= info["arena"]["vela_sram_used_bytes"] > 0
    assert info["placement_check"]["ek_npu_model"]["aligned_16"]


def test_plain_cpu_boards_are_unchanged(tmp_path):
    """The NPU hook only triggers for profiles with an npu section."""
    from edgekit.firmware.generate import generate_firmware

    result = generate_firmware(conv_model(tmp_path / "m.tflite").read_bytes(), "mps3-an547", tmp_path / "cpu")
    assert result.info.runtime == "edgekit" and "npu" not in result.info.to_dict()
