"""`edgekit quantize --format coreml` end to end through the CLI: digits W8A8 and W8, MobileNet-style W8A8, bad input."""
import json

import numpy as np
import pytest

from tests.conftest import DEMO_MODEL, DIGITS, run_cli

pytest.importorskip("coremltools", reason="coremltools is not installed: the Core ML backend cannot run")

DIGITS_ARGS = (DEMO_MODEL, "--format", "coreml", "--calib", DIGITS / "calib", "--eval-data", DIGITS / "eval")
APP_METADATA = ("--model-name", "Digits", "--version", "2.0")  # what Xcode shows (author/license keep their defaults)


def _quantize(out, *extra):
    return run_cli("quantize", *DIGITS_ARGS, "-o", out, *extra)


@pytest.fixture(scope="module")
def w8a8(tmp_path_factory):
    out = tmp_path_factory.mktemp("coreml") / "w8a8"
    return _quantize(out, *APP_METADATA), out


@pytest.fixture(scope="module")
def w8(tmp_path_factory):
    out = tmp_path_factory.mktemp("coreml") / "w8"
    return _quantize(out, "--activations", "float16", "--compute-units", "cpu_and_ne"), out


def _metadata(package):
    import coremltools as ct

    return ct.models.MLModel(str(package), skip_model_load=True)


@pytest.mark.slow
def test_digits_w8a8_writes_an_image_classifier_and_passes_parity(w8a8):
    code, out = w8a8
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json", "model_float.mlpackage", "model_w8a8.mlpackage", "parity.json", "report.html", "report.md"]
    parity = json.loads((out / "parity.json").read_text())
    assert parity["passed"] is True and parity["samples"] == 400
    (output,) = parity["outputs"]
    assert output["top1_agreement"] >= 0.97 and output["cosine"] > 0.99
    assert parity["accuracy"]["candidate_top1"] > 0.95
    summary = parity["data"]["quantization"]["coreml"]
    assert summary["precision"] == "W8A8" and summary["deployment_target"] == "iOS17"
    assert {"quantize", "dequantize", "constexpr_affine_dequantize", "conv", "classify"} <= set(summary["ops"])
    assert summary["image_input"]["color_layout"] == "G" and summary["classifier_labels"] == list(range(10))
    assert summary["float_program_vs_torch"]["max_abs_diff"] < 1e-4
    assert summary["quantized_program"]["weights_bytes"] < summary["float_program"]["weights_bytes"] / 3

    package = out / "model_w8a8.mlpackage"
    assert sorted(str(p.relative_to(package)) for p in package.rglob("*") if p.is_file()) == [
        "Data/com.apple.CoreML/model.mlmodel", "Data/com.apple.CoreML/weights/weight.bin", "Manifest.json"]
    from edgekit.coreml.evaluator import MILProgram

    program = MILProgram.load(out / "model_w8a8.mlpackage")
    (image,) = program.inputs
    assert image.is_image and image.color_layout == "G"
    model = _metadata(out / "model_w8a8.mlpackage")
    meta = model.user_defined_metadata
    assert meta["com.edgekit.precision"] == "W8A8" and meta["com.edgekit.compute_units"] == "all"
    assert json.loads(meta["com.edgekit.preprocess"])["name"] == "digits-8x8-gray"
    assert len(meta["com.edgekit.calibration_fingerprint"]) == 64 and "coremltools" in json.loads(meta["com.edgekit.tools"])
    assert model.author.startswith("edgekit") and model.version == "2.0" and model.license
    assert model.short_description.startswith("Digits: W8A8 Core ML program") and meta["com.edgekit.model_name"] == "Digits"
    # Xcode-ready: the image classifier preview, descriptions of every input and output, a sealed provenance
    assert meta["com.apple.coreml.model.preview.type"] == "imageClassifier"
    assert model.input_description["x"].startswith("grayscale image") and "preprocessing spec 'digits-8x8-gray'" in model.input_description["x"]
    assert model.output_description["classLabel"] == "most likely class label (one of 10)"
    assert model.output_description["classLabel_probs"] == "score per class label"
    from edgekit.converters.coreml.metadata import provenance_digest

    assert meta["com.edgekit.provenance_version"] == "1"
    assert meta["com.edgekit.provenance_sha256"] == provenance_digest(dict(meta))


@pytest.mark.slow
def test_package_ios_from_the_real_names(w8a8, tmp_path, capsys):
    _, out = w8a8
    bundle = tmp_path / "ios"
    assert run_cli("package", "--ios", out / "model_w8a8.mlpackage", "-o", bundle) == 0
    assert sorted(p.name for p in bundle.iterdir()) == ["ModelW8a8Vision.swift", "README.md", "model_w8a8.mlpackage"]
    swift = (bundle / "ModelW8a8Vision.swift").read_text()
    assert 'inputs "x" (8x8 Grayscale image); outputs "classLabel" (int64), "classLabel_probs"' in swift
    assert "VNCoreMLRequest(model: try VNCoreMLModel(for: model))" in swift and "[VNClassificationObservation]" in swift
    assert 'forResource: "model_w8a8", withExtension: "mlmodelc"' in swift and ".scaleFill" in swift
    readme = (bundle / "README.md").read_text()
    assert "| input | `x` | 8x8 Grayscale image |" in readme and "preview (imageClassifier)" in readme
    assert "Not tested here: compiling this Swift code" in readme and "no macOS here" in readme
    assert run_cli("package", out / "model_w8a8.mlpackage", "-o", tmp_path / "x") == 2
    assert "add --ios" in capsys.readouterr().err and not (tmp_path / "x").exists()


@pytest.mark.slow
def test_digits_w8a8_manifest_and_report(w8a8):
    _, out = w8a8
    manifest = json.loads((out / "manifest.json").read_text())
    arts = {a["stage"]: a for a in manifest["artifacts"]}
    assert arts["export"]["format"] == "mlpackage-float32" and arts["quantize"]["format"] == "mlpackage-w8a8"
    assert arts["quantize"]["params"]["compute_units"] == "all"
    assert arts["quantize"]["params"]["coreml"]["deployment_target"] == "iOS17"
    report = (out / "report.md").read_text()
    assert "## Core ML" in report and "int_op_canonicalization" in report and "ImageType" in report
    assert "MinMaxObserver" in report


@pytest.mark.slow
def test_digits_w8_weights_only(w8, w8a8):
    code, out = w8
    assert code == 0 and (out / "model_w8.mlpackage").is_dir()
    parity = json.loads((out / "parity.json").read_text())
    assert parity["passed"] is True
    (output,) = parity["outputs"]
    assert output["top1_agreement"] >= 0.99
    summary = parity["data"]["quantization"]["coreml"]
    assert summary["precision"] == "W8" and summary["deployment_target"] == "iOS16"
    assert "quantize" not in summary["ops"] and "constexpr_affine_dequantize" in summary["ops"]
    assert _metadata(out / "model_w8.mlpackage").user_defined_metadata["com.edgekit.compute_units"] == "cpu_and_ne"
    # W8 keeps activations in fp16, so it tracks the float model at least as closely as W8A8
    w8a8_sqnr = json.loads((w8a8[1] / "parity.json").read_text())["outputs"][0]["sqnr_db"]
    assert output["sqnr_db"] >= w8a8_sqnr


def _png_folder(folder, images, spec):
    """PNGs that the spec turns back into (nearly, 8-bit) the given NCHW images: the model sees its own test inputs."""
    from PIL import Image

    folder.mkdir()
    for i, image in enumerate(images):
        values = np.transpose(image, (1, 2, 0))  # HWC in the model's channel order
        pixels = np.round((values * spec["std"][0] + spec["mean"][0]) / spec["scale"]).clip(0, 255).astype(np.uint8)
        if spec["color"] == "bgr":
            pixels = pixels[:, :, ::-1]  # files are RGB; the spec swaps to BGR
        Image.fromarray(np.ascontiguousarray(pixels), mode="RGB").save(folder / f"{i:03d}.png")
    (folder / "preprocess.json").write_text(json.dumps(spec))
    return folder


@pytest.mark.slow
def test_mobilenet_like_w8a8_image_input_passes_default_tolerance(tmp_path):
    """Depthwise conv, hardswish, residual add, global pool; BGR ImageType with a bias, fed pixels for parity."""
    from tests.firmware.mobilenet_like import calibration_images

    spec = {"name": "mobilenet-bgr", "color": "bgr", "size": [32, 32], "scale": 1 / 255, "mean": [0.5], "std": [0.5],
            "layout": "NCHW", "dtype": "float32"}
    images = calibration_images(160)
    calib = _png_folder(tmp_path / "calib", images[:100], spec)
    evaluation = _png_folder(tmp_path / "eval", images[100:], spec)
    out = tmp_path / "out"
    code = run_cli("quantize", "tests.firmware.mobilenet_like:mobilenet_like", "--format", "coreml",
                   "--calib", calib, "--eval-data", evaluation, "-o", out)
    assert code == 0
    parity = json.loads((out / "parity.json").read_text())
    assert parity["passed"] is True and parity["samples"] == 60
    summary = parity["data"]["quantization"]["coreml"]
    assert {"conv", "add", "quantize", "dequantize", "sigmoid_hard", "reduce_mean"} <= set(summary["ops"])
    image = summary["image_input"]
    assert image["color_layout"] == "BGR" and image["scale"] == pytest.approx(2 / 255) and image["bias"] == [-1.0] * 3
    assert summary["float_program_vs_torch"]["max_abs_diff"] < 1e-4  # pixels fed back reproduce the torch input


@pytest.mark.slow
def test_method_mse_uses_the_histogram_observer(tmp_path):
    out = tmp_path / "mse"
    assert _quantize(out, "--method", "mse") == 0
    parity = json.loads((out / "parity.json").read_text())
    assert parity["passed"] is True
    assert parity["data"]["quantization"]["coreml"]["activation_observer"] == "HistogramObserver"
    assert "HistogramObserver (--method mse)" in (out / "report.md").read_text()


@pytest.mark.parametrize("extra, message", [
    (("--deployment-target", "iOS16"), "use --deployment-target iOS17 or newer"),
    (("--compute-units", "gpu"), "--compute-units gpu (valid: all, cpu_and_ne, cpu_only)"),
    (("--method", "entropy"), "--method entropy"),
])
def test_bad_options_fail_before_any_output(tmp_path, capsys, extra, message):
    out = tmp_path / "out"
    assert _quantize(out, *extra) != 0
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_non_pytorch_model_fails_clearly(tmp_path, capsys):
    model = tmp_path / "model.onnx"
    model.write_bytes(b"not an onnx file")
    out = tmp_path / "out"
    assert run_cli("quantize", model, "--format", "coreml", "--calib", DIGITS / "calib", "-o", out) != 0
    assert "--format coreml takes PyTorch models" in capsys.readouterr().err
    assert not out.exists()


def test_unsupported_ops_all_named_and_no_output(tmp_path, capsys):
    import torch

    class Unconvertible(torch.nn.Module):
        def forward(self, x):
            return torch.erfinv(torch.tanh(x)) + torch.cummax(x, dim=3).values

    model = tmp_path / "bad.pt2"
    torch.export.save(torch.export.export(Unconvertible(), (torch.zeros(1, 1, 8, 8),)), str(model))
    out = tmp_path / "out"
    assert run_cli("quantize", model, "--format", "coreml", "--calib", DIGITS / "calib", "-o", out) != 0
    err = capsys.readouterr().err
    assert "aten::erfinv" in err and "aten::cummax" in err
    assert not out.exists()


@pytest.mark.slow
def test_same_inputs_give_byte_identical_packages(w8a8, tmp_path):
    from edgekit.provenance import sha256_file

    _, out = w8a8
    again = tmp_path / "again"
    assert _quantize(again, *APP_METADATA) == 0
    for name in ("model_w8a8.mlpackage", "model_float.mlpackage"):
        assert sha256_file(again / name) == sha256_file(out / name)


@pytest.mark.slow
def test_torchscript_w8_with_float32_interface_and_w8a8_refused(tmp_path, capsys):
    import torch

    from tests.firmware.mobilenet_like import calibration_images, mobilenet_like

    model = tmp_path / "mobilenet.ts"
    torch.jit.trace(mobilenet_like(), torch.zeros(1, 3, 32, 32)).save(str(model))
    images = calibration_images(60)
    np.save(tmp_path / "calib.npy", images[:30])
    np.save(tmp_path / "eval.npy", images[30:])
    args = ("quantize", model, "--input-shape", "1,3,32,32", "--format", "coreml", "--calib", tmp_path / "calib.npy",
            "--eval-data", tmp_path / "eval.npy")
    refused = tmp_path / "refused"
    assert run_cli(*args, "-o", refused) != 0  # W8A8 needs a torch.export graph
    assert "TorchScript" in capsys.readouterr().err and not refused.exists()
    out = tmp_path / "w8"
    assert run_cli(*args, "--activations", "float16", "-o", out) == 0
    assert json.loads((out / "parity.json").read_text())["passed"] is True
    spec = _metadata(out / "model_w8.mlpackage").get_spec()
    float32 = 65568  # ArrayFeatureType.FLOAT32: fp16 compute inside, float32 in and out for the app
    assert [f.type.multiArrayType.dataType for f in list(spec.description.input) + list(spec.description.output)] == [float32] * 2


@pytest.mark.slow
def test_compile_ane_lists_the_program_ops(w8a8, tmp_path, capsys):
    _, out = w8a8
    assert run_cli("compile", out / "model_w8a8.mlpackage", "--target", "ane", "-o", tmp_path / "ane") == 0
    report = json.loads((tmp_path / "ane" / "coreml_placement.json").read_text())
    assert {"conv", "quantize", "dequantize", "classify"} <= set(report["op_counts"]) and "const" not in report["op_counts"]
    assert all("--compute-units each" in o["neural_engine"] for o in report["ops"])
    assert "| conv |" in (tmp_path / "ane" / "report.md").read_text()
