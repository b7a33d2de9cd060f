"""End to end on the real demo model and real digit images."""
import json

import numpy as np
import pytest

from tests.conftest import DEMO_MODEL, DIGITS
from edgekit.provenance import sha256_file
from edgekit.tflite_model import TFLiteModel


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    from edgekit.cli import main

    out = tmp_path_factory.mktemp("q") / "out"
    code = main(["quantize", str(DEMO_MODEL), "--calib", str(DIGITS / "calib"), "--eval-data", str(DIGITS / "eval"), "-o", str(out)])
    return code, out


def test_demo_quantize_writes_full_int8_model_and_passes_parity(demo_run):
    code, out = demo_run
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "model_float.tflite", "model_int8.tflite", "parity.json", "report.html",
                                                  "report.md"]
    model = TFLiteModel.load(out / "model_int8.tflite")
    assert [t.dtype for t in model.inputs + model.outputs] == [np.int8, np.int8]
    assert all(t.is_quantized for t in model.inputs + model.outputs)
    from edgekit.converters.tflite.int8 import inspect_int8

    support, tensors, ops = inspect_int8(model.data)
    assert support.ok
    weights = [t for t in tensors if t.constant and t.dtype == "INT8" and len(t.scales) > 1]
    assert len(weights) >= 4  # three convs + FC, per-channel
    assert any(t.constant and t.dtype == "INT32" for t in tensors)  # int32 biases
    assert not any(t.dtype == "FLOAT32" for t in tensors)


def test_demo_parity_json_reports_accuracy_on_held_out_digits(demo_run):
    _, out = demo_run
    parity = json.loads((out / "parity.json").read_text())
    assert parity["passed"] is True and parity["samples"] == 400
    (output,) = parity["outputs"]
    for key in ("top1_agreement", "cosine", "sqnr_db", "rmse", "mae", "rel_l2", "max_abs"):
        assert key in output
    assert output["top1_agreement"] >= 0.97 and output["cosine"] > 0.99
    acc = parity["accuracy"]
    assert acc["labels"] == 400 and acc["reference_top1"] > 0.96 and acc["candidate_top1"] > 0.95
    assert parity["thresholds"] == {"min_cosine": 0.98, "min_top1": 0.95, "min_sqnr_db": None, "min_topk": None,
                                    "min_iou": None, "output_kinds": []}
    assert output["kind"] == "class_scores" and output["kind_reason"] == "the data's labels index this output"


def test_manifest_records_lineage_hashes_tools_and_host(demo_run):
    _, out = demo_run
    manifest = json.loads((out / "manifest.json").read_text())
    arts = {a["stage"]: a for a in manifest["artifacts"]}
    assert {"source", "export", "quantize", "parity", "report"} <= set(arts)
    assert arts["quantize"]["parent_sha256"] == arts["export"]["sha256"]
    assert arts["export"]["parent_sha256"] == arts["source"]["sha256"]
    assert arts["quantize"]["sha256"] == sha256_file(out / "model_int8.tflite")
    assert arts["quantize"]["params"]["method"] == "minmax"
    assert len(arts["quantize"]["params"]["calibration_fingerprint"]) == 64
    assert "tensorflow-cpu" in manifest["tools"] and manifest["host"]["hostname"]


def test_report_lists_range_per_tensor(demo_run):
    _, out = demo_run
    report = (out / "report.md").read_text()
    assert "## Activation ranges chosen per tensor" in report
    rows = [l for l in report.splitlines() if l.startswith("| `")]
    model = TFLiteModel.load(out / "model_float.tflite")
    assert len(rows) == len(model.activation_tensors())
    assert "Accuracy on 400 labelled held-out samples" in report


def test_same_inputs_give_byte_identical_int8_model(demo_run, cli, tmp_path):
    _, out = demo_run
    again = tmp_path / "again"
    assert cli("quantize", DEMO_MODEL, "--calib", DIGITS / "calib", "--eval-data", DIGITS / "eval", "-o", again) == 0
    assert (again / "model_int8.tflite").read_bytes() == (out / "model_int8.tflite").read_bytes()
    assert (again / "model_float.tflite").read_bytes() == (out / "model_float.tflite").read_bytes()


def test_parity_command_on_quantize_output(demo_run, cli, tmp_path, capsys):
    _, out = demo_run
    report_dir = tmp_path / "parity"
    code = cli("parity", out / "model_float.tflite", out / "model_int8.tflite", "--data", DIGITS / "eval",
               "--min-cosine", "0.99", "-o", report_dir)
    assert code == 0
    parity = json.loads((report_dir / "parity.json").read_text())
    assert parity["passed"] and parity["samples"] == 400 and parity["thresholds"]["min_cosine"] == 0.99
    # an impossible threshold fails with exit 1 and names the metric
    code = cli("parity", out / "model_float.tflite", out / "model_int8.tflite", "--data", DIGITS / "eval", "--min-sqnr-db", "90")
    assert code == 1
    assert "sqnr_db" in capsys.readouterr().err


def test_int8_against_itself_is_bit_exact(demo_run, cli, tmp_path):
    _, out = demo_run
    assert cli("parity", out / "model_int8.tflite", out / "model_int8.tflite", "--data", DIGITS / "eval", "-o", tmp_path / "p") == 0
    (output,) = json.loads((tmp_path / "p" / "parity.json").read_text())["outputs"]
    assert output["bit_exact_fraction"] == 1.0 and output["differing_elements"] == 0
