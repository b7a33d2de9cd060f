"""Choosing an activation range [lo, hi] per tensor from its statistics.

Methods (registry ``RANGE_METHODS``): minmax, percentile, entropy (KL divergence), mse.
Every method sees the same histogram (statistics.NUM_BINS bins over the observed [min, max]).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Tuple

import numpy as np

from edgekit.calibration.statistics import TensorStats
from edgekit.errors import UserError
from edgekit.registry import Registry

Range = Tuple[float, float]
RangeMethod = Callable[[TensorStats, "RangeOptions"], Range]
RANGE_METHODS: Registry[RangeMethod] = Registry("calibration method")

KL_BINS = 2048  # histogram resolution for the KL search
QUANT_LEVELS = 255  # int8: 256 values, 255 steps


@dataclass(frozen=True)
class RangeOptions:
    percentile: float = 99.99
    mse_candidates: int = 200

    def __post_init__(self) -> None:
        if not 50.0 < self.percentile <= 100.0:
            raise UserError(f"--percentile {self.percentile} must be in (50, 100]")


def choose_ranges(stats: Dict[int, TensorStats], method: str, options: RangeOptions = RangeOptions()) -> Dict[int, Range]:
    """Range per tensor; always contains 0 (TFLite's asymmetric int8 requires it)."""
    fn = RANGE_METHODS.get(method)
    out: Dict[int, Range] = {}
    for index, s in stats.items():
        if s.max <= s.min:
            lo, hi = s.min, s.max
        else:
            lo, hi = fn(s, options)
        out[index] = (min(float(lo), 0.0), max(float(hi), 0.0))
    return out


@RANGE_METHODS.register("minmax")
def minmax_range(s: TensorStats, options: RangeOptions) -> Range:
    return s.min, s.max


def _quantile(s: TensorStats, q: float) -> float:
    """Value below which a fraction q of the observations lie (linear inside a bin)."""
    cdf = np.cumsum(s.hist, dtype=np.float64)
    target = q * cdf[-1]
    b = int(np.searchsorted(cdf, target, side="left"))
    b = min(b, len(s.hist) - 1)
    before = cdf[b - 1] if b > 0 else 0.0
    inside = s.hist[b]
    frac = 0.0 if inside == 0 else (target - before) / inside
    width = (s.max - s.min) / len(s.hist)
    return s.min + (b + float(np.clip(frac, 0.0, 1.0))) * width


@RANGE_METHODS.register("percentile")
def percentile_range(s: TensorStats, options: RangeOptions) -> Range:
    p = options.percentile / 100.0
    lo = s.min if s.is_nonnegative else _quantile(s, 1.0 - p)
    return lo, _quantile(s, p)


def _magnitude_histogram(s: TensorStats, bins: int) -> Tuple[np.ndarray, float]:
    """Histogram of |x| over [0, max|x|] with ``bins`` bins, from the signed histogram."""
    edges = s.edges
    centers = 0.5 * (edges[:-1] + edges[1:])
    top = max(abs(s.min), abs(s.max))
    pos = np.minimum((np.abs(centers) * (bins / top)).astype(np.int64), bins - 1)
    return np.bincount(pos, weights=s.hist.astype(np.float64), minlength=bins), top


def _kl_threshold(hist: np.ndarray, top: float, levels: int) -> float:
    """TensorRT-style search: the clip threshold whose ``levels``-level quantization of the
    clipped histogram has the least KL divergence from it."""
    nbins = len(hist)
    best_kl, best_i = np.inf, nbins
    total = hist.sum()
    if total == 0:
        return top
    step = max(1, (nbins - levels) // 512)
    for i in range(levels, nbins + 1, step):
        ref = hist[:i].astype(np.float64).copy()
        ref[-1] += hist[i:].sum()
        # merge i bins into `levels` quantization bins, then spread back over non-empty bins
        groups = np.minimum((np.arange(i) * levels) // i, levels - 1)
        nonzero = hist[:i] > 0
        merged = np.bincount(groups, weights=hist[:i], minlength=levels)
        support = np.bincount(groups, weights=nonzero, minlength=levels)
        expanded = np.where(nonzero, merged[groups] / np.maximum(support[groups], 1), 0.0)
        p = ref / ref.sum()
        q_sum = expanded.sum()
        if q_sum == 0:
            continue
        q = expanded / q_sum
        mask = p > 0
        kl = float(np.sum(p[mask] * np.log(p[mask] / np.maximum(q[mask], 1e-12))))
        if kl < best_kl:
            best_kl, best_i = kl, i
    return best_i * top / nbins


@RANGE_METHODS.register("entropy")
def entropy_range(s: TensorStats, options: RangeOptions) -> Range:
    """KL over |x| (KL_BINS bins). For non-negative tensors (ReLU outputs) the spike at zero
    is excluded, otherwise it dominates the divergence and the range is clipped far too much."""
    hist, top = _magnitude_histogram(s, KL_BINS)
    if s.is_nonnegative:
        hist = hist.copy()
        hist[0] = 0.0
        return s.min, min(s.max, _kl_threshold(hist, top, QUANT_LEVELS))
    threshold = _kl_threshold(hist, top, (QUANT_LEVELS + 1) // 2)
    return max(s.min, -threshold), min(s.max, threshold)


def quantization_mse(s: TensorStats, lo: float, hi: float) -> float:
    """Expected squared error of asymmetric uniform quantization on [lo, hi] for the histogram:
    clipping error of values outside, plus step^2/12 rounding noise inside."""
    edges = s.edges
    centers = 0.5 * (edges[:-1] + edges[1:])
    weights = s.hist.astype(np.float64)
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    step = (hi - lo) / QUANT_LEVELS
    clipped = np.clip(centers, lo, hi)
    clip_err = (centers - clipped) ** 2
    inside = (centers >= lo) & (centers <= hi)
    err = np.where(inside, step * step / 12.0, clip_err)
    return float(np.sum(weights * err) / max(weights.sum(), 1.0))


@RANGE_METHODS.register("mse")
def mse_range(s: TensorStats, options: RangeOptions) -> Range:
    """Shrink [min, max] by a common factor, then refine each end, minimizing quantization MSE."""
    factors = np.linspace(1.0 / options.mse_candidates, 1.0, options.mse_candidates)
    errors = [quantization_mse(s, s.min * f, s.max * f) for f in factors]
    best = float(factors[int(np.argmin(errors))])
    lo, hi = s.min * best, s.max * best
    for _ in range(2):
        his = np.linspace(hi * 0.5, s.max, options.mse_candidates) if hi > 0 else np.array([hi])
        hi = float(his[int(np.argmin([quantization_mse(s, lo, h) for h in his]))])
        if s.min < 0:
            los = np.linspace(lo * 0.5, s.min, options.mse_candidates)
            lo = float(los[int(np.argmin([quantization_mse(s, l, hi) for l in los]))])
    return lo, hi


def fake_quantize(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Quantize-dequantize with TFLite's asymmetric int8 scheme on [lo, hi]."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / QUANT_LEVELS if hi > lo else 1.0
    zero_point = np.clip(np.round(-128 - lo / scale), -128, 127)
    q = np.clip(np.round(values / scale) + zero_point, -128, 127)
    return (q - zero_point) * scale
