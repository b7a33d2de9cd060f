"""Calibration sources, deterministic subsets, fingerprints and the preprocessing spec."""
import numpy as np
import pytest

from tests.conftest import DIGITS
from edgekit.calibration import dataset as data
from edgekit.errors import CalibrationDataError, UserError
from edgekit.preprocessing.spec import PreprocessSpec

INPUT = [data.InputSpec("x", (1, 1, 8, 8), np.dtype(np.float32))]


def test_image_folder_with_labels_and_spec():
    source = data.open_source(DIGITS / "calib", ["x"])
    assert len(source) == 200 and len(source.labels) == 200
    samples = data.whole(source).samples(INPUT)
    assert samples[0][0].shape == (1, 1, 8, 8) and 0.0 <= samples[0][0].min() and samples[0][0].max() <= 1.0


def test_split_is_deterministic_and_disjoint():
    source = data.open_source(DIGITS / "calib", ["x"])
    a_cal, a_eval = data.split(source, calib_size=50, seed=3, holdout_fraction=0.2)
    b_cal, b_eval = data.split(source, calib_size=50, seed=3, holdout_fraction=0.2)
    c_cal, _ = data.split(source, calib_size=50, seed=4, holdout_fraction=0.2)
    assert a_cal.indices == b_cal.indices and a_eval.indices == b_eval.indices
    assert not set(a_cal.indices) & set(a_eval.indices) and len(a_cal) == 50 and len(a_eval) == 40
    assert a_cal.fingerprint == b_cal.fingerprint != c_cal.fingerprint


def test_npz_by_input_name_with_labels(tmp_path):
    path = tmp_path / "d.npz"
    np.savez(path, x=np.zeros((5, 1, 8, 8), np.float32), labels=np.arange(5))
    source = data.open_source(path, ["x"])
    assert source.labels == [0, 1, 2, 3, 4] and len(data.whole(source).samples(INPUT)) == 5


def test_npy_folder(tmp_path):
    for i in range(3):
        np.save(tmp_path / f"{i}.npy", np.full((1, 8, 8), i, np.float32))
    samples = data.whole(data.open_source(tmp_path, ["x"])).samples(INPUT)
    assert [float(s[0].max()) for s in samples] == [0.0, 1.0, 2.0]


def test_fingerprint_changes_with_content(tmp_path):
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, np.zeros((4, 1, 8, 8), np.float32))
    np.save(b, np.ones((4, 1, 8, 8), np.float32))
    fa = data.whole(data.open_source(a, ["x"])).fingerprint
    fb = data.whole(data.open_source(b, ["x"])).fingerprint
    assert fa != fb


def test_image_folder_without_spec_says_how_to_fix(tmp_path):
    (tmp_path / "a.png").write_bytes((DIGITS / "calib" / "0001.png").read_bytes() if (DIGITS / "calib" / "0001.png").exists()
                                     else next((DIGITS / "calib").glob("*.png")).read_bytes())
    with pytest.raises(CalibrationDataError, match="preprocess.json"):
        data.open_source(tmp_path, ["x"])


def test_spec_validation_collects_every_problem():
    with pytest.raises(UserError) as err:
        PreprocessSpec.from_dict({"color": "cmyk", "layout": "CHW", "std": [0.0], "size": [8]})
    text = str(err.value)
    for word in ("color", "layout", "std", "size"):
        assert word in text
