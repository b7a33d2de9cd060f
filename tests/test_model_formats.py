"""Every supported model kind goes through quantize to a full-int8 model that passes parity."""
import json

import numpy as np
import pytest

from tests.conftest import DEMO_MODEL, DIGITS
from edgekit.export import ModelKind, detect_kind
from edgekit.tflite_model import TFLiteModel

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained_module():
    import torch

    from edgekit.demo.digits_model import digits_cnn

    program = torch.export.load(str(DEMO_MODEL))
    module = digits_cnn()
    module.load_state_dict(program.state_dict)
    return module.eval()


def assert_int8_and_parity(out, min_top1=0.95):
    model = TFLiteModel.load(out / "model_int8.tflite")
    assert all(t.dtype == np.int8 for t in model.inputs + model.outputs)
    parity = json.loads((out / "parity.json").read_text())
    assert parity["passed"], parity["failures"]
    return parity


def test_onnx_model(cli, tmp_path, trained_module):
    import torch

    onnx_path = tmp_path / "digits.onnx"
    torch.onnx.export(trained_module, (torch.zeros(1, 1, 8, 8),), str(onnx_path), dynamo=False, input_names=["x"])
    assert detect_kind(str(onnx_path)) is ModelKind.ONNX
    out = tmp_path / "out"
    assert cli("quantize", onnx_path, "--calib", DIGITS / "calib", "--eval-data", DIGITS / "eval", "-o", out) == 0
    parity = assert_int8_and_parity(out)
    assert parity["accuracy"]["candidate_top1"] > 0.95


def test_torchscript_needs_and_uses_input_shape(cli, tmp_path, capsys):
    import torch

    from edgekit.demo.digits_model import digits_cnn

    path = tmp_path / "digits.ts"
    torch.jit.save(torch.jit.trace(digits_cnn().eval(), torch.zeros(1, 1, 8, 8)), str(path))
    assert detect_kind(str(path)) is ModelKind.TORCHSCRIPT
    assert cli("quantize", path, "--calib", DIGITS / "calib", "-o", tmp_path / "x") == 2
    assert "--input-shape" in capsys.readouterr().err
    out = tmp_path / "out"
    assert cli("quantize", path, "--calib", DIGITS / "calib", "--input-shape", "1,1,8,8", "-o", out,
               "--min-cosine", "0.9", "--min-top1", "0.5") == 0  # untrained weights: flat logits
    TFLiteModel.load(out / "model_int8.tflite")


def test_factory_module(cli, tmp_path):
    out = tmp_path / "out"
    assert cli("quantize", "edgekit.demo.digits_model:digits_cnn", "--calib", DIGITS / "calib",
               "--input-shape", "1,1,8,8", "-o", out, "--min-cosine", "0.9", "--min-top1", "0.5") == 0
    assert detect_kind("edgekit.demo.digits_model:digits_cnn") is ModelKind.TORCH_FACTORY
    TFLiteModel.load(out / "model_int8.tflite")


def mlperf_calib(tmp_path, shape, low, high, n=60):
    data = np.random.default_rng(0).uniform(low, high, (n, *shape)).astype(np.float32)
    path = tmp_path / "calib.npy"
    np.save(path, data)
    return path


def test_keras_h5_mlperf_anomaly_detection(cli, tmp_path, mlperf):
    calib = mlperf_calib(tmp_path, (640,), -3.0, 3.0)
    out = tmp_path / "out"
    assert cli("quantize", mlperf / "ad_autoencoder.h5", "--calib", calib, "-o", out, "--min-cosine", "0.95") == 0
    parity = assert_int8_and_parity(out)
    assert "top1_agreement" not in parity["outputs"][0]  # a reconstruction, not classes


def test_savedmodel_and_float_tflite_kws(cli, tmp_path, mlperf):
    calib = mlperf_calib(tmp_path, (49, 10, 1), -100.0, 20.0)
    for name, model in (("sm", mlperf / "kws_ref_model_savedmodel"), ("tfl", mlperf / "kws_ref_model_float32.tflite")):
        out = tmp_path / name
        assert cli("quantize", model, "--calib", calib, "-o", out, "--min-top1", "0.8", "--min-cosine", "0.95") == 0
        assert_int8_and_parity(out)


def test_already_quantized_tflite_is_refused(cli, tmp_path, mlperf, capsys):
    calib = mlperf_calib(tmp_path, (49, 10, 1), -100.0, 20.0, n=5)
    assert cli("quantize", mlperf / "kws_ref_model_int8.tflite", "--calib", calib, "-o", tmp_path / "o") == 2
    assert "already quantized" in capsys.readouterr().err
