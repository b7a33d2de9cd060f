"""Skew diagnosis when both pipelines are user code (tests/preprocessing/user_pipelines.py): each side is
described from its tensors and the decoded images, and the causes are named with PSNR before/after."""
import math

import numpy as np
import pytest

from edgekit.preprocessing.blackbox import diagnose_black_box
from edgekit.preprocessing.parity import compare_tensors, run_parity, Units
from edgekit.preprocessing.sources import TensorFolderPreprocessor
from edgekit.testing import as_pipeline, assert_preprocessing_parity
from tests.preprocessing import user_pipelines as user
from tests.preprocessing.edge_cases import PHOTO_FILES, PHOTOS

IMAGES = [PHOTOS / name for name in PHOTO_FILES]


def _diagnosis(reference, candidate):
    report, _, _ = run_parity(as_pipeline(reference), as_pipeline(candidate), IMAGES)
    assert not report.passed
    return report.diagnosis


@pytest.fixture(scope="module")
def classic():
    return _diagnosis(user.train, user.serve)


def test_classic_skew_is_named_with_psnr_and_the_fix_is_a_spec(classic):
    causes = {c["family"]: c for c in classic["causes"]}
    assert set(causes) == {"channel order", "normalization constants", "antialias"}, classic["summary"]
    assert (causes["channel order"]["candidate"], causes["channel order"]["reference"]) == ("BGR", "RGB")
    assert "mean 0.5, 0.5, 0.5, std 0.5, 0.5, 0.5" in causes["normalization constants"]["candidate"]
    assert "mean 0.485, 0.456, 0.406, std 0.229, 0.224, 0.225" in causes["normalization constants"]["reference"]
    assert causes["antialias"]["candidate"] == "OpenCV cv2.INTER_LINEAR"
    assert causes["antialias"]["reference"] == "Pillow bilinear with antialias"
    assert set(causes["antialias"]["differs_in"]) == {"antialias", "library"}
    # every explanation raises PSNR; together they explain the whole difference
    for c in classic["causes"]:
        assert c["psnr_after_db"] > c["psnr_before_db"] + 0.5
    assert classic["initial_psnr_db"] < 20 and classic["explained"] and classic["final_psnr_db"] > 60
    assert classic["residual"]["resampling_searched"]
    fix = classic["fix"]
    assert fix["implementation"] == "pillow"
    assert fix["spec"]["color"] == "rgb" and fix["spec"]["layout"] == "NCHW" and fix["spec"]["size"] == [112, 112]
    assert np.allclose(fix["spec"]["mean"], user.MEAN, atol=1e-5) and np.allclose(fix["spec"]["std"], user.STD, atol=1e-5)
    assert classic["sides"]["candidate"]["value_range"]["range"] == "-1..1"


def test_only_the_resize_method_differs():
    d = _diagnosis(user.train, user.train_nearest)
    assert [c["family"] for c in d["causes"]] == ["resize method"], d["summary"]
    assert d["causes"][0]["candidate"] == "Pillow nearest" and d["explained"]


def test_only_the_layout_differs():
    d = _diagnosis(user.train, user.train_hwc)
    assert [c["family"] for c in d["causes"]] == ["layout"], d["summary"]
    c = d["causes"][0]
    assert (c["reference"], c["candidate"]) == ("NCHW", "NHWC") and c["fixed_shape"] and math.isinf(c["psnr_after_db"])


def test_grayscale_against_rgb():
    d = _diagnosis(user.rgb_unit, user.gray_unit)
    assert [c["family"] for c in d["causes"]] == ["color"], d["summary"]
    assert (d["causes"][0]["reference"], d["causes"][0]["candidate"]) == ("RGB", "grayscale")
    assert d["explained"]


def test_two_identical_functions_name_no_cause():
    assert_preprocessing_parity(user.train, user.train_copy, IMAGES)
    ref, cand = as_pipeline(user.train).run_many(IMAGES), as_pipeline(user.train_copy).run_many(IMAGES)
    diffs = compare_tensors([p.name for p in IMAGES], ref, cand, Units.for_spec(None))
    d = diagnose_black_box(IMAGES, ref, cand, diffs)
    assert d["causes"] == [] and d["summary"] == "no difference: the tensors are identical"


def test_tensor_folder_candidate_gets_the_same_diagnosis(tmp_path, classic):
    for path in IMAGES:
        np.save(tmp_path / f"{path.stem}.npy", user.serve(path)[None])  # as a device writes it, with batch axis
    d = _diagnosis(user.train, TensorFolderPreprocessor(tmp_path))
    assert [c["family"] for c in d["causes"]] == [c["family"] for c in classic["causes"]]
    assert d["fix"]["spec"] == classic["fix"]["spec"]


def test_assert_preprocessing_parity_names_the_causes():
    with pytest.raises(AssertionError) as info:
        assert_preprocessing_parity(user.train, user.serve, IMAGES)
    message = str(info.value)
    assert "channel order: the candidate uses BGR, the reference RGB" in message
    assert "normalization constants" in message and "cv2.INTER_LINEAR" in message and "PSNR" in message


def test_cli_diagnoses_two_callables(cli, capsys, tmp_path):
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    code = cli("preprocess-parity", "--reference", "tests.preprocessing.user_pipelines:train", "--candidate",
               "tests.preprocessing.user_pipelines:serve", "--python-path", repo, "--images", PHOTOS, "-o", tmp_path / "r")
    out = capsys.readouterr().out
    assert code == 1
    assert "diagnosis: explained" in out and "channel order: the candidate uses BGR" in out
    assert 'fix (pillow spec): {"name": "reference (inferred)"' in out
    md = (tmp_path / "r" / "report.md").read_text()
    assert "| channel order | RGB | BGR |" in md and "Fix: make the candidate produce pillow:spec.json" in md
