"""Range selection methods on tensors with known distributions."""
import numpy as np
import pytest

from edgekit.calibration.ranges import RANGE_METHODS, RangeOptions, choose_ranges, fake_quantize
from edgekit.calibration.statistics import NUM_BINS, TensorStats, _histogram
from edgekit.errors import UnknownNameError
from edgekit.parity.metrics import sqnr_db


def stats_of(values: np.ndarray) -> TensorStats:
    lo, hi = float(values.min()), float(values.max())
    return TensorStats(0, "t", lo, hi, _histogram(values, lo, hi), values.size)


def relu_with_outliers(seed: int = 0):
    rng = np.random.default_rng(seed)
    clean = np.maximum(rng.normal(0.0, 1.0, 200_000), 0.0)
    calib = clean.copy()
    calib[:20] = 60.0  # a handful of outliers, as from 2 odd calibration images
    return clean, calib


@pytest.mark.parametrize("signed", [False, True])
def test_methods_pick_different_ranges_and_clipping_methods_beat_minmax(signed):
    clean, calib = relu_with_outliers()
    if signed:
        rng = np.random.default_rng(1)
        clean = rng.normal(0.0, 1.0, 200_000)
        calib = clean.copy()
        calib[:10], calib[10:20] = 60.0, -60.0
    stats = {0: stats_of(calib)}
    ranges = {m: choose_ranges(stats, m)[0] for m in RANGE_METHODS.names()}
    assert ranges["minmax"] == pytest.approx((min(calib.min(), 0), calib.max()))
    his = {m: r[1] for m, r in ranges.items()}
    assert len({round(h, 3) for h in his.values()}) == 4, his  # all four differ
    sqnr = {m: sqnr_db(clean, fake_quantize(clean, *r)) for m, r in ranges.items()}
    for method in ("percentile", "entropy"):
        assert sqnr[method] > sqnr["minmax"] + 6.0, sqnr  # at least one bit better
        assert his[method] < his["minmax"] / 5
    # MSE weighs the outliers' clipping error too: it never does worse than min/max on the
    # distribution it was calibrated on.
    calib_sqnr = {m: sqnr_db(calib, fake_quantize(calib, *r)) for m, r in ranges.items()}
    assert calib_sqnr["mse"] >= calib_sqnr["minmax"]


@pytest.mark.parametrize("seed", [0, 1])
def test_mse_beats_minmax_on_a_heavy_tailed_tensor(seed):
    """A long tail (Laplace): min/max wastes levels on rare extremes; MSE trades them for
    resolution. Scored on a fresh draw from the same distribution, not the calibration data."""
    rng = np.random.default_rng(seed)
    calib, fresh = rng.laplace(0.0, 1.0, 200_000), rng.laplace(0.0, 1.0, 200_000)
    stats = {0: stats_of(calib)}
    ranges = {m: choose_ranges(stats, m)[0] for m in RANGE_METHODS.names()}
    sqnr = {m: sqnr_db(fresh, fake_quantize(fresh, *r)) for m, r in ranges.items()}
    assert sqnr["mse"] > sqnr["minmax"] + 0.5, sqnr
    assert ranges["mse"][1] < ranges["minmax"][1]


def test_without_outliers_methods_stay_close_to_minmax_quality():
    rng = np.random.default_rng(2)
    clean = rng.uniform(-1.0, 3.0, 100_000)
    stats = {0: stats_of(clean)}
    base = sqnr_db(clean, fake_quantize(clean, *choose_ranges(stats, "minmax")[0]))
    for method in ("percentile", "mse"):
        got = sqnr_db(clean, fake_quantize(clean, *choose_ranges(stats, method)[0]))
        assert got > base - 1.0


def test_range_always_contains_zero_and_constant_tensor():
    stats = {0: TensorStats(0, "c", 2.0, 2.0, np.zeros(NUM_BINS, np.int64), 4)}
    assert choose_ranges(stats, "entropy")[0] == (0.0, 2.0)
    positive = np.random.default_rng(3).uniform(1.0, 2.0, 1000)
    assert choose_ranges({0: stats_of(positive)}, "minmax")[0][0] == 0.0


def test_unknown_method_lists_valid_ones():
    with pytest.raises(UnknownNameError, match="entropy, minmax, mse, percentile"):
        choose_ranges({}, "kl")


def test_percentile_option_is_validated():
    with pytest.raises(Exception, match="percentile"):
        RangeOptions(percentile=10)
    clean, calib = relu_with_outliers()
    stats = {0: stats_of(calib)}
    loose = choose_ranges(stats, "percentile", RangeOptions(percentile=99.999))[0][1]
    tight = choose_ranges(stats, "percentile", RangeOptions(percentile=99.9))[0][1]
    assert tight < loose
