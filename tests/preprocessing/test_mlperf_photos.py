"""Real photos through the MLPerf Tiny image-classification model (int8 input, quantization taken
from the model): the generated C flips nothing; a 1-step rounding difference (TF's float resize)
already flips low-margin predictions of this small int8 model."""
import json
import shutil

import pytest

SPEC = {"name": "ic-int8", "color": "rgb", "size": [32, 32], "resize": "bilinear", "scale": 1.0, "layout": "NHWC",
        "dtype": "int8", "quantization": "model"}


@pytest.fixture
def setup(tmp_path, mlperf, decodable_paths):
    images = tmp_path / "images"
    images.mkdir()
    for path in decodable_paths:
        shutil.copy(path, images / path.name)
    spec = tmp_path / "ic.json"
    spec.write_text(json.dumps(SPEC))
    model = mlperf / "ic_resnet8_int8.tflite"
    return spec, images, model


def test_generated_c_gives_the_int8_tensor_the_model_reads(cli, capsys, setup):
    spec, images, model = setup
    code = cli("preprocess-parity", "--reference", spec, "--candidate", f"c:{spec}", "--images", images, "--model", model,
               "--max-flip-rate", "0")
    assert code == 0
    assert "flip rate 0.0000 (0 of 23)" in capsys.readouterr().out


def test_one_quantization_step_of_rounding_flips_low_margin_predictions(cli, capsys, tmp_path, setup):
    spec, images, model = setup
    out = tmp_path / "report"
    code = cli("preprocess-parity", "--reference", spec, "--candidate", f"tf:{spec}", "--images", images, "--model", model,
               "--no-diagnose", "-o", out)
    capsys.readouterr()
    report = json.loads((out / "parity.json").read_text())
    assert report["aggregate"]["max_abs"] == 1  # at most one int8 step apart ...
    assert report["model"]["flipped"] >= 1 and code == 1  # ... and yet predictions change
    print(f"\nMLPerf IC int8 on 23 photos/edge cases: tf vs Pillow mean {report['aggregate']['mean_abs']:.4f} steps, "
          f"flips {report['model']['flipped_images']}")
