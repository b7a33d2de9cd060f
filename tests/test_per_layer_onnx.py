"""Per-layer analysis of QDQ ONNX models (edgekit.parity.layers_onnx) on the model with one known sensitive layer.

tests/sensitive_model.py's conv2 has one huge weight per output channel: per-channel symmetric int8 weights (what
both onnxruntime.quantization and NNCF use) still give it a scale of 40/127, so its informative weights round away.
In the float ONNX export conv2 is the node ``node_conv2d_1`` (conv1 is ``node_conv2d``).
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from edgekit.errors import UserError
from edgekit.parity.layers import FILES, SQNR_CAP_DB, per_layer_report
from tests.conftest import DEMO_MODEL, DIGITS, run_cli
from tests.sensitive_model import sample_inputs, sensitive_cnn

SENSITIVE_NODE = "node_conv2d_1"   # conv2 in the float ONNX export


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    work = tmp_path_factory.mktemp("sensitive_onnx")
    np.save(work / "calib.npy", sample_inputs(120, seed=0))
    np.save(work / "eval.npy", sample_inputs(24, seed=1))
    samples = [[x[None]] for x in np.load(work / "eval.npy")]
    return work, samples


@pytest.fixture(scope="module")
def ort_debug(data):
    """`edgekit quantize --format onnx --debug` (onnxruntime engine) through the CLI."""
    work, _ = data
    out = work / "ort"
    code = run_cli("quantize", "tests.sensitive_model:sensitive_cnn", "--format", "onnx", "--calib", work / "calib.npy",
                   "--eval-data", work / "eval.npy", "--debug", "-o", out)
    assert code in (0, 1)  # 1: parity fails, as it must with conv2 in int8; the outputs are written either way
    return out


def test_quantize_debug_writes_layer_reports(ort_debug):
    assert all((ort_debug / name).is_file() and (ort_debug / name).stat().st_size > 0 for name in FILES)
    assert (ort_debug / "layers.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report_md = (ort_debug / "report.md").read_text()
    assert "## Per-layer analysis" in report_md and all(f"`{name}`" in report_md for name in FILES)
    manifest = json.loads((ort_debug / "manifest.json").read_text())
    assert set(FILES) <= {a["path"] for a in manifest["artifacts"]}
    layers = json.loads((ort_debug / "layers.json").read_text())
    assert layers["format"] == "onnx" and layers["tools"]["onnxruntime"] and layers["samples_used"] == 24
    assert layers["ranking"][0]["index"] == layers["layers"][1]["index"]
    assert layers["layers"][1]["node"] == SENSITIVE_NODE


def test_sensitive_layer_is_ranked_first_with_onnxruntime(ort_debug, data):
    _, samples = data
    report = per_layer_report(ort_debug / "model_float.onnx", ort_debug / "model_int8.onnx", samples)
    top = report.most_sensitive()
    # onnxruntime fuses Conv+Relu in QDQ: the Conv writes the Relu's output name, compared with the float Relu output
    assert (top["node"], top["op"], top["tensor"], top["match"]) == (SENSITIVE_NODE, "Conv", "relu_1", "name")
    assert report.ranked(by="drop")[0]["node"] == SENSITIVE_NODE
    # onnxruntime renames the last op's output (output_QuantizeLinear_Input): matched by node name
    assert report.meta["matched"] == {"name": 5, "node": 1, "order": 0, "unmatched": 0}
    assert report.rows[-1]["reference_tensor"] == "output" and report.rows[-1]["compared_tensor"] == "output"
    # the damage is in conv2's weights, not its activation grid
    assert top["grid_sqnr_db"] > 35 and top["local_sqnr_db"] < 10 and top["likely_cause"] == "weights or accumulation"
    assert top["sqnr_drop_db"] > 25 and top["clipped_fraction"] == 0.0
    others = [r for r in report.ranked() if r["node"] != SENSITIVE_NODE]
    assert min(r["local_sqnr_db"] for r in others) > top["local_sqnr_db"] + 10
    assert all(r["sqnr_db"] < 15 for r in report.rows if r["index"] > top["index"])
    # the grid is the QuantizeLinear's own: uint8 activations, scale / zero point of the model file
    from edgekit.converters.onnx.inspect_qdq import summarize

    scales = {a.tensor: (a.scale, a.zero_point) for a in summarize(ort_debug / "model_int8.onnx").activations}
    assert (top["dtype"], top["scale"], top["zero_point"]) == ("uint8", *scales["relu_1"])
    # the input row: the float sample against what conv1 reads (the input's QuantizeLinear -> DequantizeLinear)
    assert report.inputs[0]["dtype"] == "uint8" and 25 < report.inputs[0]["sqnr_db"] < 60


@pytest.mark.slow
def test_sensitive_layer_is_ranked_first_with_nncf(data):
    """NNCF quantizes after the Relu: conv2's own output is a float row (no grid), its quantized weights are the cause."""
    work, samples = data
    out = work / "nncf"
    code = run_cli("quantize", "tests.sensitive_model:sensitive_cnn", "--format", "onnx", "--engine", "nncf",
                   "--calib", work / "calib.npy", "--eval-data", work / "eval.npy", "-o", out)
    assert code in (0, 1)
    report = per_layer_report(out / "model_float.onnx", out / "model_int8.onnx", samples)
    top = report.most_sensitive()
    assert (top["node"], top["op"], top["tensor"], top["dtype"]) == (SENSITIVE_NODE, "Conv", "conv2d_1", "float32")
    assert (top["grid_sqnr_db"], top["clipped_fraction"], top["scale"]) == (None, None, "float")
    assert top["local_sqnr_db"] < 10 and top["likely_cause"].startswith("weights or accumulation")
    assert report.meta["matched"]["unmatched"] == 0 and report.meta["matched"]["name"] == len(report.rows)
    relu = report.row("relu_1")  # the requantized Relu after conv2: rounding adds little, the grid is fine
    assert relu["dtype"] == "uint8" and relu["grid_sqnr_db"] > 35 and relu["local_sqnr_db"] > top["local_sqnr_db"] + 5


@pytest.mark.slow
def test_keep_float_row_and_the_optimized_runtime_check(data):
    """conv2 kept in float (--keep-float): its row is a float row that adds little noise. The report also measures
    the model outputs in onnxruntime's optimized session (graph optimizations on) and says so when they differ
    from the QDQ model as written, which is what parity.json measures (QDQ reference semantics) and the last row."""
    work, samples = data
    out = work / "keep_conv2"
    code = run_cli("quantize", "tests.sensitive_model:sensitive_cnn", "--format", "onnx", "--keep-float", SENSITIVE_NODE,
                   "--calib", work / "calib.npy", "--eval-data", work / "eval.npy", "--debug", "-o", out)
    assert code in (0, 1)
    layers = json.loads((out / "layers.json").read_text())
    conv2 = next(r for r in layers["layers"] if r["node"] == SENSITIVE_NODE)
    assert (conv2["dtype"], conv2["scale"], conv2["grid_sqnr_db"]) == ("float32", "float", None)
    assert conv2["local_sqnr_db"] > 40 and layers["layers"][-1]["sqnr_db"] > 30  # the damage is gone, as written
    check = layers["optimized_runtime"]["outputs"]["output"]
    assert check["sqnr_db_as_written"] == pytest.approx(layers["layers"][-1]["sqnr_db"], abs=1e-9)
    parity = json.loads((out / "parity.json").read_text())
    assert check["sqnr_db_as_written"] == pytest.approx(parity["outputs"][0]["sqnr_db"], abs=1e-3)
    assert parity["candidate"]["kernels"].startswith("onnxruntime, graph optimizations off: QDQ reference semantics")
    differs = abs(check["sqnr_db_as_written"] - check["sqnr_db_optimized"]) > 1.0
    assert bool(layers["notes"]) == differs
    assert ("graph optimizations on" in (out / "layers.md").read_text()) == differs


def test_model_against_itself_is_exact(ort_debug, data):
    _, samples = data
    float_path = ort_debug / "model_float.onnx"
    report = per_layer_report(float_path, float_path, samples[:4])
    assert report.meta["matched"] == {"name": len(report.rows), "node": 0, "order": 0, "unmatched": 0}
    for row in report.rows:
        assert row["sqnr_db"] == math.inf and row["max_abs"] == 0.0 and row["local_sqnr_db"] == SQNR_CAP_DB
        assert (row["scale"], row["clipped_fraction"], row["grid_sqnr_db"], row["likely_cause"]) == ("float", None, None, None)


def test_injected_error_is_measured_exactly(ort_debug, data, tmp_path):
    """Candidate = the float model with the head bias shifted by DELTA: only the last layer differs, by DELTA."""
    import onnx
    from onnx import numpy_helper

    _, samples = data
    delta = 0.25
    float_path = ort_debug / "model_float.onnx"
    model = onnx.load(str(float_path))
    bias = next(i for i in model.graph.initializer if i.name == "head.bias")
    bias.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(bias) + np.float32(delta), "head.bias"))
    shifted = tmp_path / "shifted.onnx"
    onnx.save(model, str(shifted))
    report = per_layer_report(float_path, shifted, samples[:8])

    import torch

    with torch.no_grad():
        outputs = np.stack([sensitive_cnn()(torch.from_numpy(s[0])).numpy() for s in samples[:8]]).astype(np.float64)
    expected = 10 * math.log10(np.sum(outputs**2) / (outputs.size * delta**2))
    last = report.rows[-1]
    assert last["op"] == "Gemm" and report.most_sensitive()["index"] == last["index"]
    assert last["max_abs"] == pytest.approx(delta, abs=1e-5) and last["rmse"] == pytest.approx(delta, abs=1e-5)
    assert last["sqnr_db"] == pytest.approx(expected, abs=1e-3)
    assert last["local_sqnr_db"] == pytest.approx(expected, abs=1e-3)
    assert all(r["sqnr_db"] == math.inf for r in report.rows[:-1])


def test_narrowed_activation_scale_is_found_and_blamed_on_the_grid(tmp_path, digits_arrays):
    """A layer made sensitive on purpose: the demo model's clean ORT QDQ with relu_1's scale cut 8x (most of its
    range clipped). That layer must rank first, with clipping and the output grid as the cause."""
    import onnx
    from onnx import numpy_helper

    out = tmp_path / "demo"
    assert run_cli("quantize", DEMO_MODEL, "--format", "onnx", "--calib", DIGITS / "calib",
                   "--eval-data", DIGITS / "eval", "-o", out) == 0
    samples = [[x[None]] for x in digits_arrays[1][:24]]
    clean = per_layer_report(out / "model_float.onnx", out / "model_int8.onnx", samples)
    assert clean.row("relu_1")["clipped_fraction"] == 0.0 and clean.most_sensitive()["local_sqnr_db"] > 30

    model = onnx.load(str(out / "model_int8.onnx"))
    scale = next(i for i in model.graph.initializer if i.name == "relu_1_scale")
    scale.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(scale) / np.float32(8), "relu_1_scale"))
    narrowed = tmp_path / "narrowed.onnx"
    onnx.save(model, str(narrowed))
    report = per_layer_report(out / "model_float.onnx", narrowed, samples)
    top = report.most_sensitive()
    assert (top["tensor"], top["node"]) == ("relu_1", "node_conv2d_1")
    assert top["clipped_fraction"] > 0.05 and top["likely_cause"] == "activation range/scale (output grid)"
    assert top["grid_sqnr_db"] < clean.row("relu_1")["grid_sqnr_db"] - 10
    assert top["scale"] == pytest.approx(clean.row("relu_1")["scale"] / 8)


def test_cli_parity_per_layer_for_two_onnx_files(ort_debug, data, tmp_path):
    work, _ = data
    out = tmp_path / "parity"
    code = run_cli("parity", ort_debug / "model_float.onnx", ort_debug / "model_int8.onnx", "--data", work / "eval.npy",
                   "--per-layer", "-o", out)
    assert code in (0, 1)
    assert all((out / name).is_file() and (out / name).stat().st_size > 0 for name in FILES)
    layers = json.loads((out / "layers.json").read_text())
    assert layers["ranking"][0]["tensor"] == "relu_1" and layers["samples_used"] == 24
    assert SENSITIVE_NODE in (out / "layers.md").read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(FILES) <= {a["path"].split("/")[-1] for a in manifest["artifacts"]}


def test_mixed_formats_and_other_networks_are_refused(ort_debug, data, tmp_path, capsys):
    import torch

    work, samples = data
    out = tmp_path / "out"
    tflite = tmp_path / "m.tflite"
    from edgekit.export import to_float_tflite

    tflite.write_bytes(to_float_tflite("tests.sensitive_model:sensitive_cnn").tflite)
    code = run_cli("parity", ort_debug / "model_float.onnx", tflite, "--data", work / "eval.npy", "--per-layer", "-o", out)
    err = capsys.readouterr().err
    assert code == 2 and "per-layer analysis needs two .onnx models" in err and "tflite model" in err
    assert not out.exists()
    other = tmp_path / "other.onnx"
    torch.onnx.export(sensitive_cnn(), (torch.zeros(1, 3, 8, 8),), str(other), dynamo=False, input_names=["x"])
    with pytest.raises(UserError, match="two versions of the same network.*shape"):
        per_layer_report(ort_debug / "model_float.onnx", other, samples[:2])
    with pytest.raises(UserError, match="no samples"):
        per_layer_report(ort_debug / "model_float.onnx", ort_debug / "model_int8.onnx", [])
