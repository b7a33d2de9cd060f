"""`edgekit quantize --format onnx`: QDQ INT8 ONNX with onnxruntime and NNCF, real models and data."""
import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import DEMO_MODEL, DIGITS, run_cli

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

pytestmark = pytest.mark.slow


def _quantize(out: Path, *extra: str, model=DEMO_MODEL) -> int:
    return run_cli("quantize", model, "--calib", DIGITS / "calib", "--eval-data", DIGITS / "eval", "--format", "onnx",
                   "-o", out, *extra)


def _op_counts(path: Path) -> dict:
    from collections import Counter

    return Counter(n.op_type for n in onnx.load(str(path)).graph.node)


@pytest.fixture(scope="module")
def ort_demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("ort") / "out"
    return _quantize(out, "--engine", "ort", "--method", "minmax"), out


def test_demo_ort_minmax_writes_qdq_model_and_passes_parity(ort_demo):
    code, out = ort_demo
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "model_float.onnx", "model_int8.onnx", "parity.json", "report.html", "report.md"]
    ops = _op_counts(out / "model_int8.onnx")
    assert ops["QuantizeLinear"] >= 6 and ops["DequantizeLinear"] >= 14  # activations + 4 weights + 4 int32 biases
    assert ops["Conv"] == 3 and ops["Gemm"] == 1
    weights = {i.name: i for i in onnx.load(str(out / "model_int8.onnx")).graph.initializer}
    int8 = [w for w in weights.values() if w.data_type == onnx.TensorProto.INT8 and len(w.dims) >= 2]
    int32 = [w for w in weights.values() if w.data_type == onnx.TensorProto.INT32 and w.name.endswith("bias_quantized")]
    assert len(int8) == 4 and len(int32) == 4 and not any(w.data_type == onnx.TensorProto.FLOAT and len(w.dims) == 4 for w in weights.values())
    parity = json.loads((out / "parity.json").read_text())
    assert parity["passed"] and parity["samples"] == 400
    (output,) = parity["outputs"]
    assert output["top1_agreement"] >= 0.99 and output["cosine"] > 0.999 and output["sqnr_db"] > 30
    assert parity["accuracy"]["candidate_top1"] > 0.96
    assert parity["data"]["quantization"]["engine"]["engine_method"] == "CalibrationMethod.MinMax"


def test_demo_ort_manifest_and_report(ort_demo):
    _, out = ort_demo
    manifest = json.loads((out / "manifest.json").read_text())
    arts = {a["stage"]: a for a in manifest["artifacts"]}
    assert arts["export"]["format"] == "onnx-float32" and arts["quantize"]["format"] == "onnx-qdq-int8"
    assert arts["quantize"]["params"]["engine"] == "ort" and arts["quantize"]["params"]["engine_version"]
    assert "dynamo" in arts["export"]["params"]["route"]
    report = (out / "report.md").read_text()
    assert "## ONNX QDQ" in report and "| tensor | scale | zero point |" in report
    assert "onnxruntime.quantization.quantize_static" in report and "per_channel': True" in report


def test_edgekit_run_measures_the_quantized_model_on_host(ort_demo, tmp_path):
    _, out = ort_demo
    code = run_cli("run", out / "model_int8.onnx", "--device", "host", "-n", "20", "--warmup", "2",
                   "--inputs", DIGITS / "eval", "--input-limit", "4", "-o", tmp_path / "run")
    assert code == 0
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    latency = run["latency_ms"]
    assert latency["count"] == 20 and 0 < latency["p50"] <= latency["p90"]
    assert "onnxruntime" in json.dumps(run)


def test_demo_nncf_minmax_passes_parity(tmp_path):
    out = tmp_path / "out"
    assert _quantize(out, "--engine", "nncf", "--method", "minmax") == 0
    ops = _op_counts(out / "model_int8.onnx")
    assert ops["QuantizeLinear"] >= 4 and ops["DequantizeLinear"] >= 8
    parity = json.loads((out / "parity.json").read_text())
    assert parity["passed"] and parity["outputs"][0]["top1_agreement"] >= 0.99
    params = json.loads((out / "manifest.json").read_text())["artifacts"][2]["params"]
    assert params["engine"] == "nncf" and params["engine_method"] == "RangeEstimatorParametersSet.MINMAX"
    assert params["engine_settings"]["subset_size"] == 160 or params["engine_settings"]["subset_size"] > 0


# --- a small model whose calibration data has outliers: the methods must give different ranges ---------------

def _tiny_onnx(path: Path, *, dynamic_batch: bool = False) -> Path:
    import torch
    from torch import nn

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                        nn.Flatten(), nn.Linear(8 * 8 * 8, 10)).eval()
    options = {"dynamic_axes": {"input": {0: "batch"}, "output": {0: "batch"}}} if dynamic_batch else {}
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.zeros(1, 1, 8, 8),), str(path), dynamo=False, opset_version=17,
                          input_names=["input"], output_names=["output"], **options)
    return path


def _outlier_data(n: int = 120, seed: int = 0, outliers: bool = True) -> np.ndarray:
    rng = np.random.default_rng(seed)
    data = rng.normal(0.0, 1.0, (n, 1, 8, 8)).astype(np.float32)
    if not outliers:
        return data
    data[3, 0, 2, 2] = 60.0   # two outliers: min/max follows them, percentile/entropy should not
    data[n // 2, 0, 5, 5] = -60.0
    return data


def test_ort_minmax_entropy_percentile_give_different_activation_scales(tmp_path):
    from edgekit.calibration.dataset import InputSpec
    from edgekit.converters.onnx import ort_quant
    from edgekit.converters.onnx.export import preprocess
    from edgekit.converters.onnx.inspect_qdq import scale_spread, summarize

    raw = _tiny_onnx(tmp_path / "raw.onnx")
    model = tmp_path / "float.onnx"
    preprocess(raw, model, "tiny")
    specs = [InputSpec("input", (1, 1, 8, 8), np.dtype(np.float32))]
    samples = [[x[None]] for x in _outlier_data()]
    scales, ticks = {}, []
    for method in ("minmax", "entropy", "percentile"):
        settings = ort_quant.ort_settings(method, 99.9)
        cache = tmp_path / f"{method}.json"
        ort_quant.calibrate(model, samples, specs, settings, cache, ticks.append)
        ort_quant.quantize(model, tmp_path / f"{method}.onnx", cache, settings)
        scales[method] = summarize(tmp_path / f"{method}.onnx")
    assert sum(ticks) == 3 * len(samples)  # progress over every sample of every run
    first = {a.tensor: a.scale for a in scales["minmax"].activations}
    assert "input" in first and len(first) >= 5
    for other in ("entropy", "percentile"):
        spread = scale_spread(scales["minmax"], scales[other])
        # every range-clipping method must shrink the outlier-driven input range well below min/max
        assert spread["differing"] >= spread["tensors"] // 2, (other, spread)
        mine = {a.tensor: a.scale for a in scales[other].activations}
        assert mine["input"] < 0.5 * first["input"], (other, mine["input"], first["input"])
    entropy = {a.tensor: a.scale for a in scales["entropy"].activations}
    percentile = {a.tensor: a.scale for a in scales["percentile"].activations}
    assert any(abs(entropy[t] / percentile[t] - 1) > 0.05 for t in entropy)  # the two clipping methods differ too


def test_calibration_cache_route_matches_plain_quantize_static(tmp_path):
    """Our route (onnxruntime's calibrator run by edgekit, ranges passed as calibration cache) gives the very
    model quantize_static makes for MinMax; and plain quantize_static Entropy really equals MinMax (the trap
    the route exists for)."""
    import contextlib
    import io

    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    from edgekit.calibration.dataset import InputSpec
    from edgekit.converters.onnx import ort_quant
    from edgekit.converters.onnx.export import preprocess
    from edgekit.converters.onnx.inspect_qdq import scale_spread, summarize

    model = tmp_path / "float.onnx"
    preprocess(_tiny_onnx(tmp_path / "raw.onnx"), model, "tiny")
    data = _outlier_data(40)

    class Reader:
        def __init__(self):
            self.items = iter([{"input": x[None]} for x in data])

        def get_next(self):
            return next(self.items, None)

    plain = {}
    for method in (CalibrationMethod.MinMax, CalibrationMethod.Entropy):
        with contextlib.redirect_stdout(io.StringIO()):
            quantize_static(str(model), str(tmp_path / f"plain_{method.name}.onnx"), Reader(), quant_format=QuantFormat.QDQ,
                            per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                            calibrate_method=method)
        plain[method.name] = summarize(tmp_path / f"plain_{method.name}.onnx")
    assert scale_spread(plain["MinMax"], plain["Entropy"])["differing"] == 0

    settings = ort_quant.ort_settings("minmax", 99.99)
    specs = [InputSpec("input", (1, 1, 8, 8), np.dtype(np.float32))]
    ort_quant.calibrate(model, [[x[None]] for x in data], specs, settings, tmp_path / "c.json", lambda n: None)
    ort_quant.quantize(model, tmp_path / "ours.onnx", tmp_path / "c.json", settings)
    assert (tmp_path / "ours.onnx").read_bytes() == (tmp_path / "plain_MinMax.onnx").read_bytes()


def test_onnx_model_as_input_with_dynamic_batch(tmp_path):
    model = _tiny_onnx(tmp_path / "tiny.onnx", dynamic_batch=True)
    np.save(tmp_path / "calib.npy", _outlier_data(60, seed=1, outliers=False))
    out = tmp_path / "out"
    code = run_cli("quantize", model, "--calib", tmp_path / "calib.npy", "--format", "onnx", "--method", "percentile",
                   "--percentile", "99.9", "-o", out)
    assert code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    export = {a["stage"]: a for a in manifest["artifacts"]}["export"]
    assert export["params"]["route"].startswith("as given")
    dims = onnx.load(str(out / "model_float.onnx")).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == [1, 1, 8, 8]
    assert _op_counts(out / "model_int8.onnx")["QuantizeLinear"] >= 3


def test_keep_float_by_op_type_leaves_those_nodes_float(tmp_path):
    model = _tiny_onnx(tmp_path / "tiny.onnx")
    np.save(tmp_path / "calib.npy", _outlier_data(40, outliers=False))
    out = tmp_path / "out"
    assert run_cli("quantize", model, "--calib", tmp_path / "calib.npy", "--format", "onnx", "--keep-float", "gemm",
                   "-o", out) == 0
    assert (out / "model_mixed.onnx").is_file() and not (out / "model_int8.onnx").exists()
    summary = json.loads((out / "parity.json").read_text())["data"]["quantization"]["qdq"]
    assert "Gemm" in summary["float_nodes"] and summary["quantized_nodes"].get("Conv") == 2
    assert "nodes_to_exclude" in (out / "report.md").read_text()


# --- bad input: one clear message, non-zero exit, nothing written ------------------------------------------

def _fails(capsys, out: Path, code: int, *needles: str) -> str:
    err = capsys.readouterr().err
    assert code == 2, err
    for needle in needles:
        assert needle in err, err
    assert not out.exists()
    return err


def test_tflite_and_keras_models_are_refused(tmp_path, capsys):
    tflite = tmp_path / "m.tflite"
    tflite.write_bytes(b"\x1c\x00\x00\x00TFL3" + bytes(64))
    keras = tmp_path / "m.h5"
    keras.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(64))
    for model in (tflite, keras):
        out = tmp_path / f"out_{model.suffix[1:]}"
        _fails(capsys, out, _quantize(out, model=model), "--format onnx takes ONNX or PyTorch models", "--format tflite")


def test_corrupt_onnx_is_an_invalid_model(tmp_path, capsys):
    good = _tiny_onnx(tmp_path / "tiny.onnx").read_bytes()
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(good[: len(good) // 2])
    out = tmp_path / "out"
    _fails(capsys, out, _quantize(out, model=bad), "is not a valid ONNX model", "truncated or corrupt")


def test_unknown_engine_lists_the_valid_ones(tmp_path, capsys):
    out = tmp_path / "out"
    _fails(capsys, out, _quantize(out, "--engine", "bogus"), "--engine bogus", "valid engines: ort, nncf")


@pytest.mark.parametrize("engine,method,reason", [
    ("nncf", "entropy", "NNCF has no KL-divergence"),
    ("nncf", "percentile", "averages per-sample quantiles"),
    ("ort", "mse", "onnxruntime has no MSE"),
])
def test_method_an_engine_lacks_is_refused_with_the_reason(tmp_path, capsys, engine, method, reason):
    out = tmp_path / "out"
    _fails(capsys, out, _quantize(out, "--engine", engine, "--method", method), reason, f"--engine {engine} takes --method")


def test_options_onnx_cannot_honour_are_collected(tmp_path, capsys):
    out = tmp_path / "out"
    err = _fails(capsys, out, _quantize(out, "--activations", "int16", "--compute-units", "cpu_only",
                                         "--fallback", "auto", "--fallback-to", "int16"),
                 "--activations int16", "--compute-units cpu_only", "--fallback-to int16")
    assert err.count("edgekit quantize: error") == 1
