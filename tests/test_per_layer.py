"""Per-layer quantization analysis (edgekit.parity.layers) on a model with one known quantization-sensitive layer."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from edgekit.errors import UserError
from edgekit.parity.layers import FILES, SQNR_CAP_DB, _Accumulator, per_layer_report
from edgekit.tflite_model import TensorInfo, TFLiteModel
from tests.conftest import run_cli
from tests.sensitive_model import (
    SENSITIVE_OP_INDEX, SENSITIVE_TENSOR, sample_inputs, sensitive_cnn,
)


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    """tests.sensitive_model quantized by edgekit (float + int8 .tflite) and 24 held-out samples."""
    from edgekit.quantize import quantize

    work = tmp_path_factory.mktemp("sensitive")
    np.save(work / "calib.npy", sample_inputs(120, seed=0))
    np.save(work / "eval.npy", sample_inputs(24, seed=1))
    quantize("tests.sensitive_model:sensitive_cnn", work / "calib.npy", work / "out")
    samples = [[x[None]] for x in np.load(work / "eval.npy")]
    return work, work / "out" / "model_float.tflite", work / "out" / "model_int8.tflite", samples


def test_sensitive_layer_is_ranked_first(quantized):
    _, float_path, int8_path, samples = quantized
    report = per_layer_report(float_path, int8_path, samples)
    top = report.most_sensitive()
    assert (top["index"], top["op"], top["tensor"]) == (SENSITIVE_OP_INDEX, "CONV_2D", SENSITIVE_TENSOR)
    assert report.ranked(by="drop")[0]["tensor"] == SENSITIVE_TENSOR
    assert report.meta["matched"] == {"name": 7, "order": 0, "inserted": 0, "unmatched": 0}
    # the damage is in conv2's weights, not its activation grid: the grid alone is fine, the layer output is not
    assert top["grid_sqnr_db"] > 35 and top["local_sqnr_db"] < 10 and top["likely_cause"] == "weights or accumulation"
    assert top["sqnr_drop_db"] > 25 and top["clipped_fraction"] == 0.0
    others = [r for r in report.ranked() if r["tensor"] != SENSITIVE_TENSOR]
    assert min(r["local_sqnr_db"] for r in others) > top["local_sqnr_db"] + 10
    # cumulative SQNR stays low downstream, which is why it is not the ranking key
    downstream = [r for r in report.rows if r["index"] > SENSITIVE_OP_INDEX]
    assert all(r["sqnr_db"] < 15 for r in downstream)
    assert all(r["dtype"] == "int8" and isinstance(r["scale"], float) for r in report.rows)
    assert report.meta["samples_used"] == len(samples) and len(report.meta["candidate"]["sha256"]) == 64


def test_model_against_itself_is_exact(quantized):
    _, float_path, _, samples = quantized
    report = per_layer_report(float_path, TFLiteModel.load(float_path), samples[:4])
    for row in report.rows:
        assert row["sqnr_db"] == math.inf and row["cosine"] == pytest.approx(1.0, abs=1e-12)
        assert row["max_abs"] == 0.0 and row["rmse"] == 0.0 and row["sqnr_drop_db"] == 0.0
        assert row["local_sqnr_db"] == SQNR_CAP_DB and row["likely_cause"] is None
        assert (row["scale"], row["zero_point"], row["clipped_fraction"], row["grid_sqnr_db"]) == ("float", "float", None, None)


def test_injected_error_is_measured_exactly(quantized, tmp_path):
    """Candidate = the float model with every head bias shifted by DELTA: only the last layer differs, by DELTA."""
    _, float_path, _, samples = quantized
    delta = 0.25
    data = float_path.read_bytes()
    bias = sensitive_cnn().head.bias.detach().numpy().astype("<f4").tobytes()
    assert data.count(bias) == 1, "head bias not found once in the flatbuffer"
    shifted = (np.frombuffer(bias, "<f4") + np.float32(delta)).astype("<f4").tobytes()
    candidate = TFLiteModel(data.replace(bias, shifted), source="shifted-bias")
    report = per_layer_report(float_path, candidate, samples[:8])

    reference = TFLiteModel.load(float_path)
    outputs = np.stack([reference.run(s, kind="reference")[0] for s in samples[:8]]).astype(np.float64)
    expected_sqnr = 10 * math.log10(np.sum(outputs**2) / (outputs.size * delta**2))
    last = report.rows[-1]
    assert last["op"] == "FULLY_CONNECTED" and report.most_sensitive()["index"] == last["index"]
    assert last["max_abs"] == pytest.approx(delta, abs=1e-6)
    assert last["rmse"] == pytest.approx(delta, abs=1e-6)
    assert last["sqnr_db"] == pytest.approx(expected_sqnr, abs=1e-4)
    assert last["local_sqnr_db"] == pytest.approx(expected_sqnr, abs=1e-4)  # inputs exact: all noise is local
    assert all(r["sqnr_db"] == math.inf for r in report.rows[:-1])


def test_accumulator_metrics_by_hand():
    """SQNR, cosine, clipping and grid rounding on numbers small enough to check on paper."""
    info = TensorInfo(0, "t", (1, 4), np.dtype(np.int8), scale=0.01, zero_point=0)  # range [-1.28, 1.27]
    acc = _Accumulator()
    ref = np.array([[0.5, -0.5, 2.0, 1.0]], np.float32)
    cand = np.array([[0.5, -0.5, 1.27, 1.0]], np.float32)
    acc.add(ref, cand, (-1.28, 1.27, 0.01))
    m = acc.metrics(quantized=info.is_quantized)
    assert m["clipped_fraction"] == 0.25                                   # only 2.0 lies beyond 1.27 + half a step
    assert m["max_abs"] == pytest.approx(0.73, abs=1e-6)
    assert m["sqnr_db"] == pytest.approx(10 * math.log10(5.5 / 0.73**2), abs=1e-4)
    assert m["grid_sqnr_db"] == pytest.approx(m["sqnr_db"], abs=1e-4)       # grid rounding gives the same error here
    assert m["cosine"] == pytest.approx(4.04 / math.sqrt(5.5 * 3.1129), abs=1e-6)  # 0.25 + 0.25 + 2.54 + 1


def test_cli_parity_per_layer_writes_reports(quantized, tmp_path, capsys):
    work, float_path, int8_path, _ = quantized
    out = tmp_path / "parity"
    code = run_cli("parity", float_path, int8_path, "--data", work / "eval.npy", "--per-layer", "-o", out)
    assert code == 0
    assert all((out / name).is_file() and (out / name).stat().st_size > 0 for name in FILES)
    layers = json.loads((out / "layers.json").read_text())
    assert layers["ranking"][0]["tensor"] == SENSITIVE_TENSOR
    assert layers["candidate"]["sha256"] and layers["tools"]["ai-edge-litert"] and layers["samples_used"] == 24
    assert SENSITIVE_TENSOR in (out / "layers.md").read_text()
    assert (out / "layers.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(FILES) <= {a["path"].split("/")[-1] for a in manifest["artifacts"]}


def test_per_layer_refuses_onnx(quantized, tmp_path, capsys):
    import torch

    work, float_path, _, _ = quantized
    onnx_path = tmp_path / "sensitive.onnx"
    torch.onnx.export(sensitive_cnn(), (torch.from_numpy(sample_inputs(1)),), str(onnx_path), dynamo=False,
                      input_names=["x"], output_names=["y"])
    out = tmp_path / "out"
    code = run_cli("parity", float_path, onnx_path, "--data", work / "eval.npy", "--per-layer", "-o", out)
    err = capsys.readouterr().err
    assert code == 2 and "per-layer analysis needs two .tflite models" in err and "onnx model" in err
    assert not out.exists()


def test_per_layer_refuses_a_different_network(quantized):
    from edgekit.export import to_float_tflite

    _, float_path, _, samples = quantized
    other = TFLiteModel(to_float_tflite("tests.sensitive_model:sensitive_cnn", input_shape=(1, 3, 8, 8)).tflite,
                        source="sensitive_cnn at 8x8")
    with pytest.raises(UserError, match="two versions of the same network.*shape"):
        per_layer_report(float_path, other, samples[:2])
    with pytest.raises(UserError, match="no samples"):
        per_layer_report(float_path, float_path, [])


def test_renamed_tensors_are_matched_by_op_order(quantized):
    _, float_path, _, samples = quantized
    data = float_path.read_bytes()
    assert data.count(b"Conv2d_conv3;1") == 2  # PAD and conv3 outputs
    renamed = TFLiteModel(data.replace(b"Conv2d_conv3;1", b"Conv2d_convX;1"), source="renamed")
    report = per_layer_report(float_path, renamed, samples[:2])
    assert [r["match"] for r in report.rows] == ["name", "name", "name", "order", "order", "name", "name"]
    assert all(r["sqnr_db"] == math.inf for r in report.rows)
    assert report.rows[4]["reference_tensor"].endswith("Conv2d_conv3;1")


def test_published_mlperf_ic_int8_against_its_float(mlperf):
    """The published int8 IC model renames only its output (Identity -> Identity_int8): matched by op order."""
    from tests.benchmarks._generated_inputs import ic_inputs

    samples = [[x[None]] for x in ic_inputs(4, seed=1)]
    report = per_layer_report(mlperf / "ic_resnet8_float32.tflite", mlperf / "ic_resnet8_int8.tflite", samples)
    assert report.meta["matched"] == {"name": 15, "order": 1, "inserted": 0, "unmatched": 0}
    assert report.inputs[0]["sqnr_db"] == math.inf  # integer pixels are exact on the scale-1.0 input grid
    assert all(r["sqnr_db"] is not None and 0 < r["sqnr_db"] < 60 for r in report.rows)


def test_mixed_model_reports_inserted_ops_and_recovers(quantized):
    """conv2 kept in float (MLIR quantizer denylist): DEQUANTIZE/QUANTIZE around it are 'inserted' rows, conv2 is a
    float row, and the damage it caused is gone."""
    from edgekit.converters.tflite.int8 import calibrated_flatbuffer, quantize_calibrated
    from edgekit.calibration.ranges import choose_ranges
    from edgekit.calibration.statistics import collect_statistics

    work, float_path, _, samples = quantized
    float_model = TFLiteModel.load(float_path)
    ranges = choose_ranges(collect_statistics(float_model, [[x[None]] for x in np.load(work / "calib.npy")]), "minmax")
    mixed = quantize_calibrated(calibrated_flatbuffer(float_model.data, ranges), float_nodes=[SENSITIVE_TENSOR])
    report = per_layer_report(float_model, TFLiteModel(mixed, source="mixed"), samples)
    assert [(r["op"], r["match"]) for r in report.rows[2:5]] == [
        ("DEQUANTIZE", "inserted"), ("CONV_2D", "name"), ("QUANTIZE", "inserted")]
    conv2 = report.row(SENSITIVE_TENSOR)
    assert (conv2["dtype"], conv2["scale"], conv2["clipped_fraction"]) == ("float32", "float", None)
    assert conv2["local_sqnr_db"] > 40 and conv2["likely_cause"].startswith("float op")
    assert report.row(report.rows[4]["tensor"])["sqnr_db"] > 30  # the QUANTIZE output, compared with conv2's float
    assert report.rows[-1]["sqnr_db"] > 30 and report.meta["matched"]["inserted"] == 2
