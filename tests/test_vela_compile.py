"""`edgekit compile` for Arm Ethos-U (Vela 5.2): outputs, Vela's own figures and reasons, bad input.

Small int8 models are built in-test from the TFLite schema (tests/firmware/opmodels.py); the MLPerf Tiny models
(committed fixtures) are compiled too. Vela runs for real (about 1 s per compile).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli

pytest.importorskip("ethosu.vela", reason="ethos-u-vela is not installed (pip install ethos-u-vela==5.2.0)")

from tests.firmware.opmodels import T, build_graph  # noqa: E402

LABEL = re.compile(r"^estimated \(Vela performance model, (ethos-u\d\d-\d+), (\w+), (\w+), clock [\d.]+ MHz\)$")


def _conv_tensors(in_channels: int = 4, dtype: str = "int8"):
    rng = np.random.default_rng(0)
    quant = dtype != "float32"
    w = rng.integers(-100, 100, size=(8, 3, 3, 4)).astype(np.int8 if quant else np.float32)
    return [T((1, 8, 8, in_channels), dtype, scale=0.05 if quant else None, name="in"),
            T((8, 3, 3, 4), dtype, data=w, scale=0.01 if quant else None, name="w"),
            T((8,), "int32" if quant else "float32", data=np.zeros(8), scale=0.0005 if quant else None, name="b"),
            T((1, 8, 8, 8), dtype, scale=0.1 if quant else None, name="conv")]


def conv_model(path: Path, *, in_channels: int = 4, dtype: str = "int8") -> Path:
    """CONV_2D 3x3, 4 -> 8 channels (in_channels != 4 makes a model with invalid TFLite semantics)."""
    path.write_bytes(build_graph(_conv_tensors(in_channels, dtype), [("CONV_2D", [0, 1, 2], [3], {"padding": "SAME"})],
                                 [0], [3]))
    return path


def conv_dequantize_model(path: Path) -> Path:
    """CONV_2D (NPU) -> DEQUANTIZE, an operator Ethos-U55 does not run (Vela: 'Unsupported opType')."""
    tensors = _conv_tensors() + [T((1, 8, 8, 8), "float32", scale=None, name="deq")]
    path.write_bytes(build_graph(tensors, [("CONV_2D", [0, 1, 2], [3], {"padding": "SAME"}),
                                           ("DEQUANTIZE", [3], [4], None)], [0], [4]))
    return path


def _compile(tmp_path: Path, model: Path, *args: str) -> dict:
    out = tmp_path / "out"
    assert run_cli("compile", model, "-o", out, *args) == 0
    return json.loads((out / "compile.json").read_text())


def check_consistent(info: dict) -> None:
    """Fields present; per-layer figures add up to Vela's totals (Vela prints both); one label everywhere."""
    perf, mem, target = info["performance"], info["memory"], info["target"]
    label = info["estimate"]["label"]
    m = LABEL.match(label)
    assert m and m.groups() == (target["accelerator"], target["system_config"], target["memory_mode"])
    assert perf["label"] == mem["label"] == label and info["estimate"]["method"] == "estimated"
    assert perf["npu_cycles_total"] > 0 and perf["macs_total"] > 0
    assert perf["layers_cycles_sum"] == perf["npu_cycles_total"]          # Vela 5.2 reports them equal
    assert perf["layers_macs_sum"] == perf["macs_total"]
    assert perf["inference_time_s"] == pytest.approx(perf["vela_inference_time_s"], rel=1e-3)
    assert perf["inference_time_s"] == pytest.approx(perf["npu_cycles_total"] / target["npu_clock_hz"])
    util = 100 * perf["macs_total"] / (perf["npu_cycles_total"] * target["macs_per_cycle"])
    assert perf["mac_utilization_percent"] == pytest.approx(util) and 0 < util <= 100
    for layer in info["layers"]:
        if layer["target"] == "NPU" and layer["cycles"]:
            assert layer["mac_utilization_percent"] == pytest.approx(
                100 * layer["macs"] / (layer["cycles"] * target["macs_per_cycle"]), abs=0.01)
    assert mem["sram_used_bytes"] + mem["dram_used_bytes"] > 0
    sig = info["signature"]
    assert re.fullmatch(r"[0-9a-f]{64}", sig["model_sha256"]) and sig["vela_version"] == "5.2.0" and sig["host"]["hostname"]
    assert info["output"]["operator_counts"].get("CUSTOM 'ethos-u'") == 1


def test_accelerator_list_comes_from_vela():
    from ethosu.vela.architecture_features import Accelerator

    from edgekit.compile.vela_tool import accelerators

    assert accelerators() == tuple(Accelerator.member_list())
    assert {"ethos-u55-128", "ethos-u55-256", "ethos-u65-256"} <= set(accelerators())


def test_compile_small_model_writes_every_output(tmp_path):
    model = conv_model(tmp_path / "conv_int8.tflite")
    info = _compile(tmp_path, model)
    out = tmp_path / "out"
    for name in ("model_vela.tflite", "compile.json", "report.md", "per_layer_cycles.png", "manifest.json",
                 "vela_per_layer.csv", "vela_summary.csv", "vela.log"):
        assert (out / name).is_file(), name
    check_consistent(info)
    assert info["target"] == {**info["target"], "accelerator": "ethos-u55-128", "system_config": "Ethos_U55_High_End_Embedded",
                              "memory_mode": "Shared_Sram", "npu_clock_hz": 500e6}   # Vela's own defaults for U55
    assert info["placement"]["all_on_npu"] and info["performance"]["macs_total"] == 8 * 8 * 8 * 3 * 3 * 4
    report = (out / "report.md").read_text()
    assert info["estimate"]["label"] in report and "not a measurement" in report and info["model"]["sha256"] in report
    manifest = json.loads((out / "manifest.json").read_text())
    compiled = next(a for a in manifest["artifacts"] if a["path"] == "model_vela.tflite")
    assert compiled["parent_sha256"] == info["model"]["sha256"] and compiled["tools"]["ethos-u-vela"] == "5.2.0"


@pytest.mark.parametrize("target, system, mode", [("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram"),
                                                  ("ethos-u65-256", "Ethos_U65_Client_Server", "Dedicated_Sram_384KB")])
def test_each_accelerator_gets_vela_defaults_and_figures(tmp_path, target, system, mode):
    info = _compile(tmp_path, conv_model(tmp_path / "conv_int8.tflite"), "--target", target)
    check_consistent(info)
    assert (info["target"]["accelerator"], info["target"]["system_config"], info["target"]["memory_mode"]) == (target, system, mode)
    assert info["target"]["macs_per_cycle"] == 256


def test_explicit_system_config_and_memory_mode(tmp_path):
    info = _compile(tmp_path, conv_model(tmp_path / "m.tflite"), "--system-config", "Ethos_U55_Deep_Embedded",
                    "--memory-mode", "Sram_Only", "--optimise", "Size")
    check_consistent(info)
    assert info["target"]["npu_clock_hz"] == 200e6 and info["target"]["optimise"] == "Size"
    assert info["target"]["memory_mode"] == "Sram_Only"


def test_operator_left_on_cpu_is_reported_with_vela_reason(tmp_path):
    from edgekit.converters import CONVERTERS, load_backends

    model = conv_dequantize_model(tmp_path / "conv_deq.tflite")
    info = _compile(tmp_path, model)
    check_consistent(info)
    assert info["placement"]["cpu_operators"] == [{"op": "DEQUANTIZE", "ofm": "deq", "reasons": ["Unsupported opType"]}]
    assert [layer["target"] for layer in info["layers"]] == ["NPU", "CPU"]
    assert "DEQUANTIZE" in info["output"]["operator_counts"]          # stays a TFLite builtin for the CPU
    assert "`DEQUANTIZE` -> `deq`: Unsupported opType" in (tmp_path / "out" / "report.md").read_text()
    load_backends()
    report = CONVERTERS.get("vela")().check_support(model, "ethos-u55-128")
    assert [(o.op, o.supported) for o in report.ops] == [("CONV_2D", True), ("DEQUANTIZE", False)]
    assert "Unsupported opType" in report.rejected[0].reason


def _fails(tmp_path, capsys, model, *args) -> str:
    out = tmp_path / "bad-out"
    code = run_cli("compile", model, "-o", out, *args)
    err = capsys.readouterr().err
    assert code != 0 and not out.exists(), err
    assert "Traceback" not in err and err.count("edgekit compile: error:") == 1
    return err


def test_float_model_is_refused_with_quantize_hint(tmp_path, capsys):
    err = _fails(tmp_path, capsys, conv_model(tmp_path / "f.tflite", dtype="float32"))
    assert "not quantized" in err and "edgekit quantize" in err


def test_unknown_accelerator_lists_valid_ones(tmp_path, capsys):
    err = _fails(tmp_path, capsys, conv_model(tmp_path / "m.tflite"), "--target", "ethos-u99-1")
    assert "ethos-u99-1" in err and all(a in err for a in ("ethos-u55-128", "ethos-u65-256", "ethos-u85-2048"))


def test_unknown_system_config_and_memory_mode_list_the_configs(tmp_path, capsys):
    err = _fails(tmp_path, capsys, conv_model(tmp_path / "m.tflite"), "--system-config", "Nope", "--memory-mode", "Bad")
    assert "2 problems" in err and "'Nope'" in err and "'Bad'" in err
    assert "Ethos_U55_High_End_Embedded" in err and "Shared_Sram" in err


def test_config_file_needs_both_sections(tmp_path, capsys):
    err = _fails(tmp_path, capsys, conv_model(tmp_path / "m.tflite"), "--config", "Arm/vela.ini")
    assert "--system-config and --memory-mode" in err


def test_corrupt_and_missing_models(tmp_path, capsys):
    good = conv_model(tmp_path / "m.tflite").read_bytes()
    truncated = tmp_path / "truncated.tflite"
    truncated.write_bytes(good[: len(good) // 2])
    err = _fails(tmp_path, capsys, truncated)
    assert "truncated" in err or "corrupt" in err
    garbage = tmp_path / "garbage.tflite"
    garbage.write_bytes(b"not a model at all")
    assert "TFLite" in _fails(tmp_path, capsys, garbage)
    assert "not found" in _fails(tmp_path, capsys, tmp_path / "missing.tflite")


def test_model_vela_rejects_reports_vela_reason(tmp_path, capsys):
    err = _fails(tmp_path, capsys, conv_model(tmp_path / "bad_semantics.tflite", in_channels=6))
    assert "Vela rejected bad_semantics.tflite" in err
    assert "IFM depth must be a whole multiple of the filter kernel depth" in err   # Vela's own words


@pytest.mark.slow
def test_mlperf_models_compile(tmp_path, mlperf):
    for name in ("kws_ref_model_int8", "ic_resnet8_int8", "ad_autoencoder_int8"):
        out = tmp_path / name
        assert run_cli("compile", mlperf / f"{name}.tflite", "-o", out) == 0
        info = json.loads((out / "compile.json").read_text())
        check_consistent(info)
        assert info["placement"]["all_on_npu"], info["placement"]
