"""`edgekit quantize --format onnx --fallback auto`: QDQ INT8 ONNX with the most sensitive nodes left in float.

tests/sensitive_model.py's conv2 (node ``node_conv2d_1`` in the float ONNX export) has one huge weight per output
channel: all-int8 reaches ~9 dB at the model output, conv2 alone in float ~42 dB (onnxruntime engine, measured).
The search (edgekit/fallback.py, shared with the TFLite backend) calibrates once and re-quantizes with a growing
nodes_to_exclude.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from edgekit.errors import UserError
from edgekit.quantize import QuantizeOptions, quantize
from tests.conftest import run_cli
from tests.sensitive_model import sample_inputs

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

MODEL = "tests.sensitive_model:sensitive_cnn"
SENSITIVE_NODE = "node_conv2d_1"   # conv2
CONV2_MACS = 16 * 16 * 16 * 8 * 9  # 16x16 output, 16 channels, 8 input channels, 3x3


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    work = tmp_path_factory.mktemp("onnx_fallback")
    np.save(work / "calib.npy", sample_inputs(64, seed=1))
    np.save(work / "eval.npy", sample_inputs(32, seed=2))
    return work


def _quantize(data, out, *extra) -> int:
    return run_cli("quantize", MODEL, "--format", "onnx", "--calib", data / "calib.npy", "--eval-data", data / "eval.npy",
                   "--fallback", "auto", "-o", out, *extra)


def _fallback(out) -> dict:
    return json.loads((out / "parity.json").read_text())["data"]["quantization"]["fallback"]


def _float_weight_nodes(path) -> set:
    """Names of Conv/Gemm nodes whose weight input is a float initializer (not a DequantizeLinear output)."""
    graph = onnx.load(str(path)).graph
    floats = {i.name for i in graph.initializer if i.data_type == onnx.TensorProto.FLOAT}
    return {n.name for n in graph.node if n.op_type in ("Conv", "Gemm") and n.input[1] in floats}


@pytest.fixture(scope="module")
def met(data):
    """--min-sqnr-db 30, with calibrate() and quantize() of ort_quant counted (the real functions still run)."""
    from edgekit.converters.onnx import ort_quant

    calls = {"calibrate": 0, "quantize": []}
    real_calibrate, real_quantize = ort_quant.calibrate, ort_quant.quantize

    def calibrate(*args, **kwargs):
        calls["calibrate"] += 1
        return real_calibrate(*args, **kwargs)

    def quantize_(float_path, out_path, cache_path, settings):
        calls["quantize"].append((cache_path, list(settings.nodes_to_exclude)))
        return real_quantize(float_path, out_path, cache_path, settings)

    out = data / "met"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ort_quant, "calibrate", calibrate)
        patch.setattr(ort_quant, "quantize", quantize_)
        code = _quantize(data, out, "--min-sqnr-db", "30")
    return code, out, calls


@pytest.mark.slow
def test_fallback_moves_conv2_to_float_first_and_meets_the_target(met):
    code, out, _ = met
    assert code == 0
    fallback = _fallback(out)
    steps = fallback["steps"]
    assert fallback["met"] and len(steps) == 2
    assert steps[0]["step"] == "all int8" and not steps[0]["passed"] and 3.0 < steps[0]["outputs"][0]["sqnr_db"] < 15.0
    assert steps[1]["tried"] == SENSITIVE_NODE and steps[1]["kept"] and steps[1]["passed"]
    assert steps[1]["float_ops"] == [SENSITIVE_NODE] and steps[1]["outputs"][0]["sqnr_db"] >= 30.0
    assert fallback["chosen"] == steps[1]["step"]
    # the cost of each step: float weights are larger, conv2's MACs run in float, host latency measured
    assert steps[1]["size_bytes"] > steps[0]["size_bytes"]
    assert (steps[0]["float_macs"], steps[1]["float_macs"]) == (0, CONV2_MACS)
    assert fallback["total_macs"] > CONV2_MACS
    assert all(s["host_latency_ms"] > 0 for s in steps) and "onnxruntime" in fallback["latency_method"]
    parity = json.loads((out / "parity.json").read_text())
    assert parity["passed"] and parity["outputs"][0]["sqnr_db"] == pytest.approx(steps[1]["outputs"][0]["sqnr_db"], abs=1e-3)


@pytest.mark.slow
def test_fallback_writes_a_mixed_model_with_only_conv2_in_float(met):
    _, out, _ = met
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "model_float.onnx", "model_mixed.onnx", "parity.json", "report.html", "report.md"]
    assert _float_weight_nodes(out / "model_mixed.onnx") == {SENSITIVE_NODE}
    assert _float_weight_nodes(out / "model_float.onnx") == {"node_conv2d", "node_conv2d_1", "node_conv2d_2", "node_linear"}
    quantize_art = next(a for a in json.loads((out / "manifest.json").read_text())["artifacts"] if a["stage"] == "quantize")
    assert quantize_art["format"] == "onnx-qdq-int8-mixed-float32" and quantize_art["path"] == "model_mixed.onnx"
    assert quantize_art["params"]["float_nodes"] == [SENSITIVE_NODE]
    assert quantize_art["params"]["engine_settings"]["nodes_to_exclude"] == [SENSITIVE_NODE]
    report = (out / "report.md").read_text()
    assert "## Mixed precision (--fallback auto)" in report and "**met**" in report
    assert f"Conv x1 ({SENSITIVE_NODE}): --fallback auto" in report and "measured on this host" in report


@pytest.mark.slow
def test_fallback_calibrates_once_and_reuses_the_cache(met):
    _, _, calls = met
    assert calls["calibrate"] == 1
    caches = {str(cache) for cache, _ in calls["quantize"]}
    assert len(caches) == 1 and [nodes for _, nodes in calls["quantize"]] == [[], [SENSITIVE_NODE]]


@pytest.mark.slow
def test_unreachable_target_fails_and_lists_every_step(data):
    out = data / "unmet"
    assert _quantize(data, out, "--min-sqnr-db", "70") == 1
    fallback = _fallback(out)
    steps = fallback["steps"]
    assert not fallback["met"] and len(steps) >= 3
    assert steps[1]["tried"] == SENSITIVE_NODE and steps[1]["kept"]
    assert any(not s["kept"] for s in steps[2:])  # ops that did not pay were reverted
    best = max(steps, key=lambda s: s["outputs"][0]["sqnr_db"])
    assert fallback["chosen"] == best["step"]
    parity = json.loads((out / "parity.json").read_text())
    assert not parity["passed"] and parity["outputs"][0]["sqnr_db"] == pytest.approx(best["outputs"][0]["sqnr_db"], abs=1e-3)
    report = (out / "report.md").read_text()
    assert "**NOT met**" in report and report.count("| + float ") == len(steps) - 1


@pytest.mark.slow
def test_keep_float_is_the_starting_plan(data):
    out = data / "keep"
    assert _quantize(data, out, "--min-sqnr-db", "30", "--keep-float", "node_conv2d") == 0
    steps = _fallback(out)["steps"]
    assert steps[0]["step"] == "int8 + --keep-float" and steps[0]["float_ops"] == ["node_conv2d"]
    assert steps[-1]["passed"] and steps[-1]["float_ops"] == ["node_conv2d", SENSITIVE_NODE]


def test_node_macs_of_the_sensitive_model(data):
    from edgekit.converters.onnx import node_macs
    from edgekit.converters.onnx.export import to_float_onnx

    path = data / "float.onnx"
    path.write_bytes(to_float_onnx(MODEL, None).data)
    assert node_macs(path) == {"node_conv2d": 16 * 16 * 8 * 27, SENSITIVE_NODE: CONV2_MACS,
                               "node_conv2d_2": 8 * 8 * 16 * 144, "node_linear": 16 * 10}


@pytest.mark.parametrize("options, words", [
    ({"fallback": "auto", "fallback_to": "int16"}, "--fallback-to int16 (--format onnx keeps 8-bit activations"),
    ({"fallback_to": "int16"}, "--fallback-to int16 without --fallback auto"),
    ({"fallback": "auto", "engine": "nncf"}, "--fallback auto with --engine nncf (every nncf.quantize call recalibrates"),
])
def test_fallback_options_onnx_cannot_honour_are_refused(tmp_path, options, words):
    with pytest.raises(UserError, match="cannot honour") as err:
        quantize("no-model-needed.onnx", tmp_path, tmp_path / "out", QuantizeOptions(format="onnx", **options))
    assert words in str(err.value)
    assert not (tmp_path / "out").exists()
