"""PreprocessSpec: validation (every problem at once), JSON/YAML, compatibility with the first version."""
import json

import numpy as np
import pytest
from PIL import Image

from edgekit.errors import CalibrationDataError, UserError
from edgekit.preprocessing.spec import PreprocessSpec, find_spec, load_image
from tests.conftest import DIGITS
from tests.preprocessing.edge_cases import PHOTOS


def test_every_problem_is_reported_at_once():
    with pytest.raises(UserError) as err:
        PreprocessSpec.from_dict({
            "color": "cmyk", "size": [8], "shorter_side": 0, "resize": "cubic", "antialias": "yes",
            "crop": [0, 4], "layout": "CHW", "dtype": "int16", "scale": 0, "mean": [0.1, 0.2],
            "std": [0.0], "decode": {"alpha": "keep", "background": [300, 0, 0], "exif": True},
            "colour": "rgb",
        }, source="bad.json")
    text = str(err.value)
    for word in ("color", "size", "shorter_side", "resize", "antialias", "crop", "layout", "dtype", "scale",
                 "mean", "std [0.0] must hold positive numbers", "decode.alpha", "decode.background", "unknown decode key",
                 "unknown key(s) ['colour']", "bad.json", "Fix:"):
        assert word in text, word


def test_quantized_dtype_needs_quantization_and_checks_ranges():
    with pytest.raises(UserError, match="needs quantization"):
        PreprocessSpec.from_dict({"dtype": "int8"})
    with pytest.raises(UserError, match=r"zero_point 200 must be an integer in \[-128, 127\]"):
        PreprocessSpec.from_dict({"dtype": "int8", "quantization": {"scale": 0.1, "zero_point": 200}})
    with pytest.raises(UserError, match="quantization is given but dtype is 'float32'"):
        PreprocessSpec.from_dict({"quantization": "model"})
    spec = PreprocessSpec.from_dict({"dtype": "uint8", "quantization": {"scale": 0.5, "zero_point": 3}})
    assert (spec.quant_scale, spec.quant_zero_point, spec.quantized) == (0.5, 3, True)
    assert PreprocessSpec.from_dict({"dtype": "int8", "quantization": "model"}).quant_from_model


def test_geometry_conflicts_are_rejected():
    with pytest.raises(UserError, match="either size or shorter_side"):
        PreprocessSpec.from_dict({"size": [8, 8], "shorter_side": 8})
    with pytest.raises(UserError, match="crop .* larger than the resized size"):
        PreprocessSpec.from_dict({"size": [8, 8], "crop": [9, 8]})
    with pytest.raises(UserError, match="offset or mean/std"):
        PreprocessSpec.from_dict({"offset": -1.0, "mean": [0.5]})


def test_offset_form_is_mean_with_unit_std():
    spec = PreprocessSpec.from_dict({"scale": 2 / 255, "offset": -1.0})
    assert spec.mean == (1.0,) and spec.std == (1.0,)


def test_yaml_and_json_load_the_same_spec(tmp_path):
    data = {"name": "y", "color": "bgr", "shorter_side": 40, "crop": [32, 32], "resize": "bicubic", "antialias": False,
            "mean": [0.5], "std": [0.25], "layout": "NCHW", "decode": {"exif_orientation": False, "alpha": "composite",
            "background": [0, 0, 0], "high_bit_depth": "round"}}
    (tmp_path / "s.json").write_text(json.dumps(data))
    (tmp_path / "s.yaml").write_text(
        "name: y\ncolor: bgr\nshorter_side: 40\ncrop: [32, 32]\nresize: bicubic\nantialias: false\n"
        "mean: [0.5]\nstd: [0.25]\nlayout: NCHW\ndecode:\n  exif_orientation: false\n  alpha: composite\n"
        "  background: [0, 0, 0]\n  high_bit_depth: round\n")
    a, b = PreprocessSpec.load(tmp_path / "s.json"), PreprocessSpec.load(tmp_path / "s.yaml")
    assert a == b
    assert PreprocessSpec.from_dict(a.to_dict()) == a  # round trip
    (tmp_path / "bad.yaml").write_text("name: [unclosed\n")
    with pytest.raises(UserError, match="not valid YAML"):
        PreprocessSpec.load(tmp_path / "bad.yaml")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(UserError, match="must be a JSON/YAML object"):
        PreprocessSpec.load(tmp_path / "list.json")


def test_first_version_specs_keep_their_dict_and_fingerprint_keys():
    """to_dict of a spec without new features has exactly the original keys (calibration
    fingerprints hash it), so existing caches and manifests stay valid."""
    spec = find_spec(DIGITS / "calib")
    assert set(spec.to_dict()) == {"name", "color", "size", "resize", "scale", "mean", "std", "layout", "dtype"}
    assert spec.to_dict() == json.loads((DIGITS / "preprocess.json").read_text())


def test_digits_reference_is_the_original_formula():
    spec = find_spec(DIGITS / "eval")
    for path in sorted((DIGITS / "eval").glob("*.png"))[:20]:
        expected = np.asarray(Image.open(path).convert("L"), np.float32)[None] * np.float32(1 / 255)
        np.testing.assert_array_equal(load_image(path, spec), expected)


def test_load_image_names_the_unreadable_file(tmp_path):
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    with pytest.raises(CalibrationDataError, match="cannot read image .*broken.png"):
        load_image(bad, PreprocessSpec())


def test_shapes_and_units():
    spec = PreprocessSpec.load(PHOTOS / "preprocess.json")
    assert spec.sample_shape() == (3, 224, 224)
    assert spec.output_hw((427, 640)) == (224, 224)
    np.testing.assert_allclose(spec.value_step(), [1 / 255 / 0.229, 1 / 255 / 0.224, 1 / 255 / 0.225])
    shorter = spec.replace(crop=None)
    assert shorter.output_hw((427, 640)) == (256, 383)  # torchvision Resize(256): int(256 * 640 / 427)
    assert shorter.output_hw((600, 512)) == (300, 256)


def test_core_ml_and_tflite_metadata_parameters_reproduce_the_value_stage():
    from edgekit.preprocessing.export_params import coreml_image_type, tflite_normalization
    from edgekit.preprocessing.values import scale_values

    pixels = np.arange(256, dtype=np.uint8).reshape(16, 16, 1).repeat(3, axis=2)
    spec = PreprocessSpec.from_dict({"color": "bgr", "mean": [0.5, 0.4, 0.3], "std": [0.5]})
    expected = scale_values(pixels, spec)  # reference values (channel order BGR)
    ct = coreml_image_type(spec)
    assert ct["color_layout"] == "BGR"
    np.testing.assert_allclose(ct["scale"] * pixels[:, :, ::-1] + np.asarray(ct["bias"]), expected, rtol=1e-5, atol=1e-5)
    tfl = tflite_normalization(spec)
    np.testing.assert_allclose((pixels[:, :, ::-1] - np.asarray(tfl["mean"])) / np.asarray(tfl["std"]), expected,
                               rtol=1e-5, atol=1e-5)
    imagenet = PreprocessSpec.load(PHOTOS / "preprocess.json")
    with pytest.raises(UserError, match="one scale for all channels"):
        coreml_image_type(imagenet)
    np.testing.assert_allclose(tflite_normalization(imagenet)["mean"], [123.675, 116.28, 103.53])
