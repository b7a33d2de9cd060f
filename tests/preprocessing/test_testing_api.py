"""edgekit.testing: parity checks inside a user's own test suite, failures that name the cause."""
import numpy as np
import pytest

from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.testing import assert_matches_reference, assert_preprocessing_parity, check_preprocessing_parity
from tests.preprocessing.edge_cases import PHOTOS

SPEC = {"name": "api", "color": "rgb", "size": [48, 64], "resize": "bilinear", "mean": [0.5], "std": [0.25],
        "layout": "NHWC"}


def app_preprocess(path):
    """A user's serving function with the classic bug: 0..255 values, no normalization."""
    from PIL import Image

    image = Image.open(path).convert("RGB").resize((64, 48), Image.Resampling.BILINEAR)
    return np.asarray(image, np.float32)


def test_matching_pipelines_pass_and_return_the_report():
    report = assert_preprocessing_parity(SPEC, PreprocessSpec.from_dict(SPEC), PHOTOS)
    assert report.passed and report.aggregate["max_abs"] == 0
    assert assert_matches_reference("c", SPEC, PHOTOS).passed


def test_a_wrong_callable_fails_with_the_cause_in_the_message():
    with pytest.raises(AssertionError) as err:
        assert_preprocessing_parity(SPEC, app_preprocess, PHOTOS)
    message = str(err.value)
    assert "preprocessing parity failed" in message
    assert "mean_abs_lsb" in message
    assert "cause: explained" in message and "normalization constants: the candidate uses 0..255 (no scaling)" in message
    assert "worst image:" in message


def test_check_returns_a_falsy_report_instead_of_raising():
    report = check_preprocessing_parity(SPEC, app_preprocess, sorted(PHOTOS.glob("*.jpg"))[:2], diagnose=False)
    assert not report and report.diagnosis is None and len(report.images) == 2


def test_thresholds_can_be_set_per_check():
    """OpenCV's INTER_AREA vs Pillow's antialiased bilinear: fails by default, passes when accepted."""
    with pytest.raises(AssertionError, match="library: the candidate uses opencv"):
        assert_matches_reference("opencv", SPEC, PHOTOS)
    assert assert_matches_reference("opencv", SPEC, PHOTOS, max_mean_abs_lsb=3.0, min_psnr_db=30, diagnose=False)
