"""A real client loads what `edgekit quantize --format tflite` writes: MediaPipe Tasks' ImageClassifier (mediapipe
1.2.2, its C library on Linux) reads our metadata (image properties, normalization, labels), classifies the committed
digits and returns our labels.

Scores: MediaPipe runs LiteRT with its default XNNPACK kernels. They equal edgekit's run of the same model with those
kernels (`edgekit run --device host` uses them) exactly, 0 quantization steps apart. `edgekit parity` runs LiteRT's
BUILTIN_REF kernels (the bit-exactness reference); XNNPACK differs from them by 1 LSB on some intermediate elements
(TOOLCHAIN.md), which the int8 softmax (step 1/256) turns into up to ~10 steps on a few images (measured: 3 of 60).
So against parity's run the test checks the same top-1 class on every image and records the largest difference."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.mobile.nhwc_digits import build_keras_digits, nhwc_copy

NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
IMAGES = 60  # eval images classified by MediaPipe


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    root = tmp_path_factory.mktemp("nhwc-digits")
    labels = root / "labels.txt"
    labels.write_text("\n".join(NAMES) + "\n")
    return {"model": build_keras_digits(root / "digits_rgb.keras"), "calib": nhwc_copy("calib", root / "calib"),
            "eval": nhwc_copy("eval", root / "eval"), "labels": labels, "root": root}


def _quantize(digits, io: str):
    from edgekit.mobile.tflite_metadata import ModelInfo
    from edgekit.quantize import QuantizeOptions, quantize

    out = digits["root"] / f"q_{io}"
    options = QuantizeOptions(io=io, labels=digits["labels"], eval_data=digits["eval"],
                              model_info=ModelInfo(name="digits", version="2.1", author="edgekit tests", license="CC-BY-4.0"))
    result = quantize(str(digits["model"]), digits["calib"], out, options)
    assert result.parity.passed, result.parity.failures
    return out / "model_int8.tflite", result


@pytest.fixture(scope="module")
def uint8_model(digits):
    return _quantize(digits, "uint8")


@pytest.fixture(scope="module")
def float_model(digits):
    return _quantize(digits, "float32")


def _mediapipe_scores(model_path, files):
    mp = pytest.importorskip("mediapipe")
    from PIL import Image
    from mediapipe.tasks.python import vision
    from mediapipe.tasks.python.core.base_options import BaseOptions

    options = vision.ImageClassifierOptions(base_options=BaseOptions(model_asset_path=str(model_path)), max_results=10)
    rows = []
    with vision.ImageClassifier.create_from_options(options) as classifier:
        for path in files:
            pixels = np.ascontiguousarray(np.asarray(Image.open(path).convert("RGB")))
            result = classifier.classify(mp.Image(image_format=mp.ImageFormat.SRGB, data=pixels))
            categories = result.classifications[0].categories
            scores = np.zeros(10)
            for c in categories:
                scores[c.index] = c.score
            rows.append((categories[0].category_name, scores))
    return rows


def _edgekit_scores(model_path, data, count):
    """What `edgekit parity` runs (the model's runner, BUILTIN_REF, dequantized outputs) and what `edgekit run --device
    host` runs (LiteRT's default kernels, XNNPACK), on the dataset's first ``count`` samples."""
    from edgekit.calibration import dataset as ds
    from edgekit.parity.runners import open_runner
    from edgekit.tflite_model import TFLiteModel, _interpreter_module, dequantize, quantize_input

    runner = open_runner(model_path)
    inputs = runner.input_specs()
    dataset = ds.whole(ds.open_source(data, [i.name for i in inputs], None))
    samples = dataset.samples(inputs)[:count]
    files = [dataset.source.files[i] for i in dataset.indices][:count]
    model = TFLiteModel.load(model_path)
    default = _interpreter_module().Interpreter(model_content=model.data, num_threads=1)
    default.allocate_tensors()
    (inp,), (out,) = model.inputs, model.outputs
    xnnpack = []
    for sample in samples:
        default.set_tensor(inp.index, quantize_input(sample[0], inp))
        default.invoke()
        xnnpack.append(dequantize(default.get_tensor(out.index), out).reshape(-1))
    reference = [runner.run(s)[0][0].reshape(-1) for s in samples]
    return files, reference, xnnpack, dataset.labels[:count]


@pytest.mark.slow  # the module quantizes the digits model twice (uint8 and float32 I/O)
@pytest.mark.parametrize("which", ["uint8", "float32"])
def test_mediapipe_classifies_with_our_labels_and_scores(which, digits, request, record_property):
    model_path, result = request.getfixturevalue(f"{which}_model" if which == "uint8" else "float_model")
    files, reference, xnnpack, truth = _edgekit_scores(model_path, digits["eval"], IMAGES)
    theirs = _mediapipe_scores(model_path, files)

    step = 1.0 / 256  # the int8 softmax output grid (uint8 output: its scale; float32 output: dequantized from it)
    vs_xnnpack = max(np.abs(scores - mine).max() for (_, scores), mine in zip(theirs, xnnpack))
    assert vs_xnnpack <= 1e-6, f"MediaPipe vs edgekit's run with the same (XNNPACK) kernels: {vs_xnnpack / step:.2f} steps"
    vs_reference = max(np.abs(scores - mine).max() for (_, scores), mine in zip(theirs, reference))
    record_property("mediapipe_vs_builtin_ref_steps", round(float(vs_reference / step), 2))  # plain float: xdist sends it
    names = [name for name, _ in theirs]
    assert set(names) <= set(NAMES)  # our labels, not indices
    assert names == [NAMES[int(np.argmax(mine))] for mine in reference]  # parity's run: same class on every image
    accuracy = np.mean([NAMES.index(n) == t for n, t in zip(names, truth)])
    assert accuracy >= 0.95, accuracy
    summary = json.loads((model_path.parent / "parity.json").read_text())["data"]["quantization"]["mobile"]
    assert summary["io"] == which and summary["labels"] == 10 and summary["labels_source"].endswith("labels.txt")


@pytest.mark.slow
def test_uint8_input_takes_raw_pixels_and_metadata_reads_back(uint8_model, digits, cli, capsys):
    model_path, _ = uint8_model
    from edgekit.mobile.tflite_metadata import read_metadata
    from edgekit.tflite_model import TFLiteModel

    model = TFLiteModel.load(model_path)
    (inp,), (out,) = model.inputs, model.outputs
    assert inp.dtype == np.uint8 and inp.shape == (1, 8, 8, 3)
    assert inp.zero_point == 0 and inp.scale == pytest.approx(1 / 255)  # q = the pixel itself
    assert out.dtype == np.uint8 and [o.name for o in model.ops][0] == "QUANTIZE"
    meta = read_metadata(model.data)
    m = meta["metadata"]
    assert (m["name"], m["version"], m["author"], m["license"], m["minParserVersion"]) == \
        ("digits", "2.1", "edgekit tests", "CC-BY-4.0", "1.0.0")
    tensor = m["subgraphMetadata"][0]["inputTensorMetadata"][0]
    assert tensor["content"]["contentProperties"] == {"colorSpace": 1, "defaultSize": {"width": 8, "height": 8}}
    assert tensor["processUnits"][0]["options"] == {"mean": [0.0] * 3, "std": [255.0] * 3}
    assert tensor["stats"] == {"max": [255.0], "min": [0.0]}
    labels_file = m["subgraphMetadata"][0]["outputTensorMetadata"][0]["associatedFiles"][0]
    assert labels_file["name"] == "labels.txt" and labels_file["type"] == 2  # TENSOR_AXIS_LABELS
    assert meta["files"]["labels.txt"].split() == NAMES
    provenance = json.loads(meta["files"]["edgekit_provenance.json"])
    manifest = json.loads((model_path.parent / "manifest.json").read_text())
    float_art = next(a for a in manifest["artifacts"] if a["stage"] == "export")
    assert provenance["float_model_sha256"] == float_art["sha256"] and provenance["io"] == "uint8"

    assert cli("inspect", model_path) == 0
    printed = capsys.readouterr().out
    assert "input 0: serving_default_image:0 uint8 [1, 8, 8, 3]" in printed and "labels (10): zero, one" in printed
    assert "normalization: mean [0.0, 0.0, 0.0] std [255.0, 255.0, 255.0]" in printed


def test_inspect_any_tflite(cli, capsys, mlperf):
    assert cli("inspect", mlperf / "kws_ref_model_int8.tflite", "--json") == 0
    info = json.loads(capsys.readouterr().out)
    assert info["metadata"] is None and info["inputs"][0]["dtype"] == "int8" and info["op_counts"]["CONV_2D"] == 5


def test_bad_mobile_options(cli, capsys, tmp_path, digits):
    labels = tmp_path / "three.txt"
    labels.write_text("a\nb\nc\n")
    out = tmp_path / "out"
    assert cli("quantize", digits["model"], "--calib", digits["calib"], "--labels", labels, "-o", out) == 2
    err = capsys.readouterr().err
    assert "has 3 names, the model's output has 10 classes" in err and not out.exists()
    assert cli("quantize", digits["model"], "--calib", digits["calib"], "--io", "uint8", "--activations", "int16",
               "-o", out) == 2
    assert "16x8 models keep int16 input/output" in capsys.readouterr().err and not out.exists()
