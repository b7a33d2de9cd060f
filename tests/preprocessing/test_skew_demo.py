"""Acceptance: the classic skew (Pillow bilinear + RGB + ImageNet mean/std in training, OpenCV
INTER_LINEAR + BGR + mean/std 0.5 in the app) is detected, its causes are named, and the
prediction flip rate is measured on the demo model (behind an RGB input, edgekit.preprocessing.demo)."""
import json

import pytest

from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.preprocessing.base import implementation
from edgekit.preprocessing.demo import APP_SPEC, REFERENCE_SPEC, write_demo
from edgekit.preprocessing.parity import Thresholds, open_model, read_labels, run_parity
from edgekit.preprocessing.sources import list_images


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """400 real eval digits rendered as color images, the RGB demo model, both specs."""
    return write_demo(tmp_path_factory.mktemp("skew") / "demo")


def test_classic_skew_is_detected_named_and_its_flip_rate_measured(cli, capsys, demo):
    out = demo / "report"
    code = cli("preprocess-parity", "--reference", demo / "reference.json", "--candidate", f"opencv:{demo / 'app.json'}",
               "--images", demo / "images", "--model", demo / "model.tflite", "-o", out)
    printed = capsys.readouterr().out
    assert code == 1
    report = json.loads((out / "parity.json").read_text())
    model = report["model"]
    print(f"\nclassic skew on {model['images']} digits: flip rate {model['flip_rate']:.4f}, accuracy "
          f"{model['accuracy']['reference_top1']:.4f} -> {model['accuracy']['candidate_top1']:.4f}, "
          f"mean {report['aggregate']['mean_abs_lsb']:.2f} LSB")
    assert model["images"] == 400 and model["flip_rate"] > 0.2
    assert model["accuracy"]["candidate_top1"] < model["accuracy"]["reference_top1"] - 0.15
    diagnosis = report["diagnosis"]
    families = {c["family"]: c for c in diagnosis["causes"]}
    assert diagnosis["explained"], diagnosis["summary"]
    assert families["channel order"]["candidate"] == "BGR"
    assert families["normalization constants"]["candidate"] == "-1..1 (x / 127.5 - 1)"
    assert families["normalization constants"]["reference"] == "ImageNet mean/std (RGB order)"
    assert "without antialias" in families["antialias"]["candidate"]
    assert "channel order: the candidate uses BGR" in printed and "flip rate" in printed
    assert (out / "worst_diff.png").is_file()


def test_each_cause_alone_and_the_fixed_app(demo):
    """Flip rate of the app pipeline with all but one cause fixed (and with all fixed), same model."""
    model = open_model(demo / "model.tflite")
    images = list_images(demo / "images")
    labels = read_labels(demo / "images")
    reference = implementation("pillow", PreprocessSpec.from_dict(REFERENCE_SPEC))
    app = PreprocessSpec.from_dict(APP_SPEC)
    train = PreprocessSpec.from_dict(REFERENCE_SPEC)
    variants = {
        "only BGR": app.replace(mean=train.mean, std=train.std, antialias=True),
        "only mean/std 0.5": app.replace(color="rgb", antialias=True),
        "only no antialias": app.replace(color="rgb", mean=train.mean, std=train.std),
        "all fixed": train,
    }
    rates = {}
    for name, spec in variants.items():
        report, _, _ = run_parity(reference, implementation("opencv" if spec.antialias is False else "pillow", spec),
                                  images, model=model, labels=labels, diagnose=False, thresholds=Thresholds())
        rates[name] = report.model["flip_rate"]
    print("\nflip rate per single cause:", {k: round(v, 4) for k, v in rates.items()})
    assert rates["all fixed"] == 0.0
    assert all(rates[k] > 0 for k in ("only BGR", "only mean/std 0.5", "only no antialias"))


def test_the_generated_c_of_the_training_spec_flips_nothing(cli, capsys, demo):
    code = cli("preprocess-parity", "--reference", demo / "reference.json", "--candidate", f"c:{demo / 'reference.json'}",
               "--images", demo / "images", "--model", demo / "model.tflite", "--max-flip-rate", "0")
    assert code == 0
    assert "flip rate 0.0000 (0 of 400)" in capsys.readouterr().out
