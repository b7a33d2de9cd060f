"""Per-layer analysis of Core ML programs (edgekit.parity.layers_coreml) on the model with one known sensitive layer.

tests/sensitive_model.py's conv2 keeps one huge weight per output channel: Core ML's per-channel symmetric int8
weights give it a scale of 40/127 and its informative weights round away. In the programs conv2 is the variable
``conv2d_1`` (float32) / ``conv2d_1_cast_fp16`` (fp16 program).
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from edgekit.errors import UserError
from edgekit.parity.layers import FILES, SQNR_CAP_DB, per_layer_report
from tests.conftest import run_cli
from tests.sensitive_model import sample_inputs

pytest.importorskip("coremltools", reason="coremltools is not installed: the Core ML backend cannot run")

SENSITIVE = "conv2d_1_cast_fp16"


@pytest.fixture(scope="module")
def w8a8(tmp_path_factory):
    """`edgekit quantize --format coreml --debug` (W8A8) of the sensitive model through the CLI, and 24 samples."""
    work = tmp_path_factory.mktemp("sensitive_coreml")
    np.save(work / "calib.npy", sample_inputs(64, seed=0))
    np.save(work / "eval.npy", sample_inputs(24, seed=1))
    out = work / "w8a8"
    code = run_cli("quantize", "tests.sensitive_model:sensitive_cnn", "--format", "coreml", "--calib", work / "calib.npy",
                   "--eval-data", work / "eval.npy", "--debug", "-o", out)
    assert code in (0, 1)  # 1: parity fails, as it must with conv2 in int8; the outputs are written either way
    return work, out, [[x[None]] for x in np.load(work / "eval.npy")]


def test_quantize_debug_writes_layer_reports(w8a8):
    _, out, _ = w8a8
    assert all((out / name).is_file() and (out / name).stat().st_size > 0 for name in FILES)
    assert (out / "layers.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report_md = (out / "report.md").read_text()
    assert "## Per-layer analysis" in report_md and all(f"`{name}`" in report_md for name in FILES)
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(FILES) <= {a["path"] for a in manifest["artifacts"]}
    layers = json.loads((out / "layers.json").read_text())
    assert layers["format"] == "mlpackage" and layers["tools"]["coremltools"] and layers["samples_used"] == 24
    assert layers["ranking"][0]["tensor"] == SENSITIVE


def test_sensitive_layer_is_ranked_first_in_w8a8(w8a8):
    _, out, samples = w8a8
    report = per_layer_report(out / "model_float.mlpackage", out / "model_w8a8.mlpackage", samples)
    top = report.most_sensitive()
    assert (top["op"], top["tensor"], top["reference_tensor"], top["match"]) == ("conv", SENSITIVE, "conv2d_1", "name")
    # the conv's output stays fp16 (the quantize follows the relu): no grid, its int8 weights are the cause
    assert (top["dtype"], top["grid_sqnr_db"], top["clipped_fraction"]) == ("fp16", None, None)
    assert top["local_sqnr_db"] < 10 and top["sqnr_drop_db"] > 25
    assert top["likely_cause"].startswith("weights or accumulation")
    others = [r for r in report.ranked() if r["tensor"] != SENSITIVE]
    assert min(r["local_sqnr_db"] for r in others) > top["local_sqnr_db"] + 5
    # every op matched: by name (T -> T_cast_fp16) except the last linear, renamed (linear -> linear_0_cast_fp16)
    assert report.meta["matched"] == {"name": len(report.rows) - 1, "order": 1, "unmatched": 0}
    assert (report.rows[-1]["op"], report.rows[-1]["reference_tensor"], report.rows[-1]["match"]) == ("linear", "linear", "order")
    relu = report.row("relu_1_cast_fp16")  # requantized after conv2: a uint8 grid that alone is fine
    assert relu["dtype"] in ("uint8", "int8") and isinstance(relu["scale"], float) and relu["grid_sqnr_db"] > 35
    assert report.inputs[0]["dtype"] in ("uint8", "int8") and 30 < report.inputs[0]["sqnr_db"] < 60


def test_program_against_itself_is_exact(w8a8):
    _, out, samples = w8a8
    path = out / "model_float.mlpackage"
    report = per_layer_report(path, path, samples[:3])
    assert report.meta["matched"] == {"name": len(report.rows), "order": 0, "unmatched": 0}
    for row in report.rows:
        assert row["sqnr_db"] == math.inf and row["max_abs"] == 0.0 and row["local_sqnr_db"] == SQNR_CAP_DB
        assert (row["dtype"], row["scale"], row["grid_sqnr_db"], row["likely_cause"]) == ("fp32", "float", None, None)


def test_cli_parity_per_layer_for_two_packages_and_mixed_formats_refused(w8a8, tmp_path, capsys):
    work, out, _ = w8a8
    dest = tmp_path / "parity"
    code = run_cli("parity", out / "model_float.mlpackage", out / "model_w8a8.mlpackage", "--data", work / "eval.npy",
                   "--per-layer", "-o", dest)
    assert code in (0, 1)
    layers = json.loads((dest / "layers.json").read_text())
    assert layers["ranking"][0]["tensor"] == SENSITIVE
    assert all((dest / name).is_file() for name in FILES)
    with pytest.raises(UserError, match=r"needs two \.mlpackage models.*tflite model"):
        from edgekit.export import to_float_tflite

        tflite = tmp_path / "m.tflite"
        tflite.write_bytes(to_float_tflite("tests.sensitive_model:sensitive_cnn").tflite)
        per_layer_report(out / "model_float.mlpackage", tflite, [])


@pytest.mark.slow
def test_w8_rows_are_fp16_with_int8_weights(w8a8, tmp_path):
    """W8 (int8 weights, fp16 activations): no grids anywhere; conv2 still ranks first, blamed on its weights."""
    work, _, _ = w8a8
    out = tmp_path / "w8"
    code = run_cli("quantize", "tests.sensitive_model:sensitive_cnn", "--format", "coreml", "--activations", "float16",
                   "--calib", work / "calib.npy", "--eval-data", work / "eval.npy", "--debug", "-o", out)
    assert code in (0, 1)
    layers = json.loads((out / "layers.json").read_text())
    rows = layers["layers"]
    assert all(r["dtype"] == "fp16" and r["grid_sqnr_db"] is None for r in rows)
    top = layers["ranking"][0]
    assert top["tensor"] == SENSITIVE and top["local_sqnr_db"] < 10
    conv2 = next(r for r in rows if r["tensor"] == SENSITIVE)
    assert conv2["likely_cause"] == "weights or accumulation (quantized weights, output not requantized here)"
