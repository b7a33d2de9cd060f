"""Calibration methods on the real demo model with outliers injected into calibration data."""
import logging

import numpy as np
import pytest

from edgekit.calibration.ranges import RangeOptions, choose_ranges
from edgekit.calibration.statistics import cache_key, collect_statistics
from edgekit.converters.tflite import TFLiteInt8Converter
from edgekit.parity.metrics import sqnr_db
from edgekit.provenance import sha256_bytes
from edgekit.tflite_model import TFLiteModel


@pytest.fixture(scope="module")
def outlier_setup(demo_float_tflite, digits_arrays):
    calib, evaluation, _ = digits_arrays
    polluted = calib[:100].copy()
    polluted[:2, 0, 2:4, 3] = 25.0  # hot pixels in two odd calibration images (a sensor glitch)
    model = TFLiteModel.load(demo_float_tflite)
    samples = [[x[None]] for x in polluted]
    stats = collect_statistics(model, samples)
    return model, stats, evaluation[:200]


def int8_sqnr(model, ranges, evaluation):
    int8 = TFLiteModel(TFLiteInt8Converter().convert(model, ranges).tflite)
    ref = np.stack([model.run([x[None]], kind="reference")[0] for x in evaluation])
    got = np.stack([int8.run([x[None]], kind="reference")[0] for x in evaluation])
    return sqnr_db(ref, got)


def test_methods_choose_different_ranges_and_clipping_methods_win(outlier_setup):
    model, stats, evaluation = outlier_setup
    input_index = model.inputs[0].index
    options = RangeOptions(percentile=99.9)
    ranges = {m: choose_ranges(stats, m, options) for m in ("minmax", "percentile", "entropy", "mse")}
    his = {m: r[input_index][1] for m, r in ranges.items()}
    assert his["minmax"] == pytest.approx(25.0, rel=1e-6)
    assert len({round(v, 4) for v in (his["minmax"], his["percentile"], his["entropy"])}) == 3, his
    assert his["percentile"] < 1.01 and his["entropy"] < 5.0  # clean pixels are in [0, 1]
    sqnr = {m: int8_sqnr(model, r, evaluation) for m, r in ranges.items()}
    assert sqnr["percentile"] > sqnr["minmax"] + 3.0, sqnr
    assert sqnr["entropy"] > sqnr["minmax"] + 3.0, sqnr
    # MSE weighs the clipping error of the 4 hot pixels (value 25) against rounding noise of
    # the rest and keeps them: it wins on long tails (tests/test_ranges.py), not on rare spikes.
    assert sqnr["mse"] >= sqnr["minmax"] - 0.5, sqnr


def test_statistics_are_cached_by_fingerprint(demo_float_tflite, digits_arrays, caplog):
    model = TFLiteModel.load(demo_float_tflite)
    samples = [[x[None]] for x in digits_arrays[0][:20]]
    key = cache_key(sha256_bytes(model.data), "test-fingerprint")
    first = collect_statistics(model, samples, key=key)
    calls = []
    original = model.run
    model.run = lambda *a, **k: calls.append(1) or original(*a, **k)
    with caplog.at_level(logging.INFO, logger="edgekit"):
        second = collect_statistics(model, samples, key=key)
    assert not calls and "taken from cache" in caplog.text
    assert all(np.array_equal(first[i].hist, second[i].hist) and first[i].max == second[i].max for i in first)


@pytest.mark.parametrize("budget_mb", ["0", "0.05"])
def test_statistics_do_not_depend_on_the_memory_kept_between_passes(demo_float_tflite, digits_arrays, monkeypatch, budget_mb):
    """Pass 2 from kept pass-1 values (default budget), from a second inference (0 MB) or a mix (0.05 MB: the first
    few samples kept): the same statistics."""
    model = TFLiteModel.load(demo_float_tflite)
    samples = [[x[None]] for x in digits_arrays[0][:24]]
    kept = collect_statistics(model, samples)
    monkeypatch.setenv("EDGEKIT_STATS_MEMORY_MB", budget_mb)
    runs = []
    original = model.run
    model.run = lambda *a, **k: runs.append(1) or original(*a, **k)
    other = collect_statistics(model, samples)
    assert 24 < len(runs) <= 48 if budget_mb != "0" else len(runs) == 48
    for i in kept:
        assert (kept[i].min, kept[i].max, kept[i].count) == (other[i].min, other[i].max, other[i].count)
        assert np.array_equal(kept[i].hist, other[i].hist)
