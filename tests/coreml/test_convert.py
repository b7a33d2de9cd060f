"""Core ML backend pieces: options, model loading, unsupported ops, ImageType pixels, class labels."""
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from tests.conftest import DEMO_MODEL, DIGITS
from edgekit.errors import UnsupportedOpError, UserError
from edgekit.quantize import QuantizeOptions

OPTIONS = QuantizeOptions(format="coreml")


def _problems(**changes):
    from edgekit.converters import load_backends
    from edgekit.quantize import option_problems

    return option_problems(load_backends().get("coreml")(), replace(OPTIONS, **changes))


def test_defaults_and_documented_values_are_accepted():
    assert _problems() == []
    assert _problems(activations="float16") == []
    assert _problems(method="mse") == []
    for units in ("all", "cpu_and_ne", "cpu_only"):
        assert _problems(compute_units=units) == []
    for target in ("iOS17", "iOS18"):
        assert _problems(deployment_target=target) == []
    assert _problems(activations="float16", deployment_target="iOS16") == []


def test_deployment_target_too_old_names_the_minimum():
    (problem,) = _problems(deployment_target="iOS16")
    assert "too old for W8A8" in problem and "iOS17" in problem
    (problem,) = _problems(deployment_target="iOS15", activations="float16")
    assert "iOS16" in problem and "iOS17" in problem  # lists the valid targets


def test_every_unsupported_option_is_named_at_once():
    problems = _problems(activations="int16", compute_units="gpu", engine="nncf", method="entropy", fallback="auto", weights="int4")
    text = "\n".join(problems)
    assert len(problems) == 6
    assert "--compute-units gpu (valid: all, cpu_and_ne, cpu_only)" in text
    assert "--activations int16" in text and "float16 = W8" in text
    assert "--method entropy" in text and "HistogramObserver" in text
    assert "--fallback auto (--format coreml does not take it; it is for --format onnx / tflite)" in text
    assert "--engine nncf" in text and "--weights int4" in text


def test_percentile_refused_and_w8_takes_no_method():
    assert "--method percentile" in _problems(method="percentile")[0]
    assert "W8 has no activation ranges" in _problems(method="mse", activations="float16")[0]


def test_non_pytorch_model_is_refused_with_the_fix(tmp_path):
    from edgekit.converters.coreml.source import load_torch_source

    model = tmp_path / "model.onnx"
    model.write_bytes(b"not really onnx")
    with pytest.raises(UserError) as err:
        load_torch_source(str(model), None)
    assert "--format coreml takes PyTorch models" in str(err.value) and "torch.export.save" in err.value.fix


@pytest.fixture(scope="module")
def coreml_backend():
    pytest.importorskip("coremltools", reason="coremltools is not installed")
    from edgekit.converters import load_backends

    return load_backends().get("coreml")()


def test_demo_exports_with_a_torch_reference(coreml_backend, tmp_path):
    reference = coreml_backend.export(str(DEMO_MODEL), OPTIONS, tmp_path)
    (spec,) = reference.runner.input_specs()
    assert spec.shape == (1, 1, 8, 8) and reference.main_file == "model_float.mlpackage"
    outputs, _ = reference.runner.run([np.zeros((1, 1, 8, 8), np.float32)])
    assert outputs[0].shape == (1, 10)
    assert reference.runner.describe()["runtime"].startswith("torch ")


def test_every_unsupported_torch_op_is_named(coreml_backend, tmp_path):
    import torch

    class Unconvertible(torch.nn.Module):
        def forward(self, x):
            values, _ = torch.cummax(x, dim=1)  # no coremltools converter
            return torch.erfinv(torch.tanh(x)) + values  # erfinv: no converter either

    path = tmp_path / "bad.pt2"
    torch.export.save(torch.export.export(Unconvertible(), (torch.zeros(1, 4),)), str(path))
    with pytest.raises(UnsupportedOpError) as err:
        coreml_backend.export(str(path), OPTIONS, tmp_path)
    rejected = sorted(op.op for op in err.value.report.rejected)
    assert rejected == ["aten::cummax", "aten::erfinv"]
    assert "2 operator(s) cannot be converted" in str(err.value)


def test_pixel_feeds_invert_the_spec_exactly():
    from edgekit.converters.coreml.image import ImageInput, PixelFeeds
    from edgekit.preprocessing.spec import PreprocessSpec
    from edgekit.preprocessing.values import lay_out, scale_values

    spec = PreprocessSpec(color="bgr", scale=1 / 255, mean=(0.485, 0.456, 0.406), std=(0.229, 0.229, 0.229), layout="NCHW")
    pixels = np.random.default_rng(0).integers(0, 256, (5, 7, 3)).astype(np.uint8)  # RGB working order
    values = lay_out(scale_values(pixels, spec), spec)[None]
    feeds = PixelFeeds(ImageInput("image", 1.0, [0.0] * 3, "BGR", spec))([values])
    expected = pixels[:, :, ::-1].transpose(2, 0, 1)[None].astype(np.float32)  # model channel order (BGR)
    np.testing.assert_array_equal(feeds["image"], expected)


def test_image_input_only_for_image_folders_and_per_channel_std_refused():
    from edgekit.converters.coreml.image import image_input
    from edgekit.preprocessing.spec import PreprocessSpec, find_spec

    spec = find_spec(DIGITS / "calib")
    folder = SimpleNamespace(preprocess=spec, calib_set=SimpleNamespace(source=SimpleNamespace(kind="image-folder")))
    image = image_input("x", (1, 1, 8, 8), folder)
    assert image.color_layout == "G" and image.scale == pytest.approx(1 / 255) and image.bias == [0.0]
    arrays = SimpleNamespace(preprocess=None, calib_set=SimpleNamespace(source=SimpleNamespace(kind="array-file")))
    assert image_input("x", (1, 1, 8, 8), arrays) is None
    rgb = PreprocessSpec(color="rgb", mean=(0.5, 0.5, 0.5), std=(0.2, 0.3, 0.4), layout="NCHW")
    with pytest.raises(UserError, match="one scale for all channels"):
        image_input("x", (1, 3, 8, 8), replace_preprocess(folder, rgb))


def replace_preprocess(inputs, spec):
    return SimpleNamespace(preprocess=spec, calib_set=inputs.calib_set)


def test_class_labels_from_names_file_or_integer_labels(tmp_path):
    from edgekit.converters.coreml.image import class_labels

    def inputs(folder, labels):
        return SimpleNamespace(calib_set=SimpleNamespace(source=SimpleNamespace(path=folder), labels=labels))

    assert class_labels(inputs(tmp_path, [0, 3, 9]), (1, 10)) == list(range(10))
    assert class_labels(inputs(tmp_path, [0, 12]), (1, 10)) is None  # labels do not fit the outputs
    assert class_labels(inputs(tmp_path, None), (1, 10)) is None
    assert class_labels(inputs(tmp_path, [0, 1]), (1, 8, 8, 2)) is None  # not a class vector
    (tmp_path / "labels.txt").write_text("cat\ndog\nbird\n")
    assert class_labels(inputs(tmp_path, None), (1, 3)) == ["cat", "dog", "bird"]
