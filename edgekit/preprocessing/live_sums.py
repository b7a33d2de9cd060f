"""Mergeable statistics of calib-check's live data: summarised per sample or per chunk, merged in any order.

- Input values per channel (``ChannelSums``): counts on fixed bin edges spanning the calibration set's
  range of that channel (``INPUT_BINS`` equal bins), the count and sum of the live values below and above
  that range, min/max, and count/mean/M2 (Chan's parallel merge). KS and Wasserstein-1 distances and the
  percentiles come from these; no sample is kept and no subsample is drawn, so they do not depend on how
  the data was split.
- Activations per tensor (``ActivationSums``): live min/max and the exact counts of values below/above the
  calibrated range (pass 1); with ``--effect`` a second pass adds the 8192-bin histogram on the merged live
  min/max (edgekit.calibration.statistics' bins), which gives the same ``TensorStats`` as collecting the
  statistics in one process.
Counts are integers (exact); float sums differ only by the order of float64 additions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from edgekit.calibration.statistics import NUM_BINS, TensorStats, _histogram
from edgekit.preprocessing.calib_result import ChannelDistances, ChannelSummary

INPUT_BINS = 4096
MAX_NAMED = 100  # corrupt samples named in the report (all are counted)


@dataclass
class ChannelSums:
    """Values of one input channel on fixed bin edges [lo, hi] (INPUT_BINS equal bins)."""

    lo: float
    hi: float
    bins: np.ndarray
    below: int = 0
    above: int = 0
    sum_below: float = 0.0
    sum_above: float = 0.0
    count: int = 0
    mean: float = 0.0
    m2: float = 0.0
    min: float = math.inf
    max: float = -math.inf

    @classmethod
    def empty(cls, lo: float, hi: float) -> "ChannelSums":
        if not hi > lo:  # a constant calibration channel: one unit around it
            lo, hi = lo - 0.5, lo + 0.5
        return cls(float(lo), float(hi), np.zeros(INPUT_BINS, np.int64))

    def add(self, values: np.ndarray) -> None:
        v = np.asarray(values, np.float64).ravel()
        if not v.size:
            return
        low, high = v < self.lo, v > self.hi
        inside = v[~(low | high)]
        pos = ((inside - self.lo) * (INPUT_BINS / (self.hi - self.lo))).astype(np.int64)
        np.clip(pos, 0, INPUT_BINS - 1, out=pos)
        self.bins += np.bincount(pos, minlength=INPUT_BINS)
        self.below += int(low.sum())
        self.above += int(high.sum())
        self.sum_below += float(v[low].sum())
        self.sum_above += float(v[high].sum())
        mean = float(v.mean())
        self._merge_moments(v.size, mean, float(np.sum((v - mean) ** 2)))
        self.min = min(self.min, float(v.min()))
        self.max = max(self.max, float(v.max()))

    def _merge_moments(self, n: int, mean: float, m2: float) -> None:
        total = self.count + n
        delta = mean - self.mean
        self.m2 += m2 + delta * delta * self.count * n / total
        self.mean += delta * n / total
        self.count = total

    def merge(self, other: "ChannelSums") -> None:
        if (other.lo, other.hi) != (self.lo, self.hi):
            raise ValueError("channel sums with different bin edges cannot be merged")
        if not other.count:
            return
        self.bins += other.bins
        self.below += other.below
        self.above += other.above
        self.sum_below += other.sum_below
        self.sum_above += other.sum_above
        self._merge_moments(other.count, other.mean, other.m2)
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)

    @property
    def width(self) -> float:
        return (self.hi - self.lo) / INPUT_BINS

    def cdf(self) -> np.ndarray:
        """CDF at each bin's upper edge."""
        return (self.below + np.cumsum(self.bins)) / max(self.count, 1)

    def quantile(self, q: float) -> float:
        """Linear within a bin; below/above the edges linear between the live min/max and the edge."""
        n = self.count
        target = q * n
        if target <= self.below:
            return self.min + (self.lo - self.min) * (target / self.below) if self.below else self.lo
        if target >= n - self.above:
            return self.hi + (self.max - self.hi) * ((target - (n - self.above)) / self.above) if self.above else self.hi
        cum = self.below + np.cumsum(self.bins)
        k = int(np.searchsorted(cum, target, side="left"))
        before = cum[k - 1] if k else self.below
        inside = (target - before) / self.bins[k] if self.bins[k] else 0.0
        return float(self.lo + (k + inside) * self.width)

    def summary(self) -> ChannelSummary:
        return {"mean": self.mean, "std": math.sqrt(self.m2 / self.count) if self.count else 0.0,
                "min": self.min, "max": self.max,
                "p1": self.quantile(0.01), "p50": self.quantile(0.5), "p99": self.quantile(0.99)}


def distances(calib: ChannelSums, live: ChannelSums) -> ChannelDistances:
    """KS (largest CDF gap at the bin edges and at the calibration range's ends) and Wasserstein-1
    (sum of CDF gaps x bin width inside the range; outside it exact from the live values' sums)."""
    fc, fl = calib.cdf(), live.cdf()
    n = max(live.count, 1)
    ks = float(max(np.max(np.abs(fc - fl)), abs(calib.below / max(calib.count, 1) - live.below / n)))
    inside = float(np.sum(np.abs(fc - fl)) * calib.width)
    tails = (live.below * calib.lo - live.sum_below + live.sum_above - live.above * calib.hi) / n
    w = inside + tails
    span = float(max(calib.max, live.max) - min(calib.min, live.min)) or 1.0
    return {"calib": calib.summary(), "live": live.summary(), "ks": ks, "wasserstein": w, "wasserstein_rel": w / span,
            "mean_shift_rel": (live.mean - calib.mean) / span}


def channel_axis(array: np.ndarray, layout: Optional[str]) -> Optional[int]:
    """Axis of the channels of a (1, ...) input array; None when it is not an image tensor."""
    if array.ndim != 4:
        return None
    if layout is not None:
        return 1 if layout == "NCHW" else 3
    return 1 if array.shape[1] in (1, 3) and array.shape[3] not in (1, 3) else 3


def split_channels(array: np.ndarray, axis: Optional[int]) -> List[np.ndarray]:
    if axis is None:
        return [np.asarray(array)]
    return [np.take(array, c, axis=axis) for c in range(array.shape[axis])]


@dataclass(frozen=True)
class InputEdges:
    """Per channel of input 0: the calibration set's range, which fixes the bin edges of both sides."""

    axis: Optional[int]
    ranges: Tuple[Tuple[float, float], ...]

    @classmethod
    def from_samples(cls, samples: Sequence[Sequence[np.ndarray]], layout: Optional[str]) -> "InputEdges":
        axis = channel_axis(np.asarray(samples[0][0]), layout)
        lo: Optional[np.ndarray] = None
        hi: Optional[np.ndarray] = None
        for s in samples:
            parts = split_channels(np.asarray(s[0], np.float64), axis)
            a = np.array([p.min() for p in parts])
            b = np.array([p.max() for p in parts])
            lo = a if lo is None else np.minimum(lo, a)
            hi = b if hi is None else np.maximum(hi, b)
        return cls(axis, tuple((float(x), float(y)) for x, y in zip(lo, hi)))

    def empty(self) -> List[ChannelSums]:
        return [ChannelSums.empty(lo, hi) for lo, hi in self.ranges]

    def channel_names(self) -> List[Union[int, str]]:  # channel index, or "all" for a non-image input
        return list(range(len(self.ranges))) if self.axis is not None else ["all"]


def input_sums(samples: Sequence[Sequence[np.ndarray]], edges: InputEdges) -> List[ChannelSums]:
    sums = edges.empty()
    for s in samples:
        add_input(sums, s, edges)
    return sums


def add_input(sums: List[ChannelSums], sample: Sequence[np.ndarray], edges: InputEdges) -> None:
    for channel, values in zip(sums, split_channels(np.asarray(sample[0]), edges.axis)):
        channel.add(values)


@dataclass
class ActivationSums:
    """Pass 1 over live data: per tensor [min, max] and counts (below, above, total) against the calibrated ranges."""

    minmax: Dict[int, List[float]]
    counts: Dict[int, List[int]]

    @classmethod
    def empty(cls, indices: Sequence[int]) -> "ActivationSums":
        return cls({i: [math.inf, -math.inf] for i in indices}, {i: [0, 0, 0] for i in indices})

    def add(self, values: Dict[int, np.ndarray], ranges: Dict[int, Tuple[float, float]]) -> None:
        for i, v in values.items():
            m = self.minmax[i]
            m[0] = min(m[0], float(v.min()))
            m[1] = max(m[1], float(v.max()))
            if i in ranges:
                lo, hi = ranges[i]
                c = self.counts[i]
                c[0] += int(np.count_nonzero(v < lo))
                c[1] += int(np.count_nonzero(v > hi))
                c[2] += int(v.size)

    def merge(self, other: "ActivationSums") -> None:
        for i, (a, b) in other.minmax.items():
            m = self.minmax[i]
            m[0], m[1] = min(m[0], a), max(m[1], b)
        for i, c in other.counts.items():
            self.counts[i] = [x + y for x, y in zip(self.counts[i], c)]


@dataclass
class LiveSums:
    """Everything calib-check needs from some live samples (pass 1)."""

    inputs: List[ChannelSums]
    activations: ActivationSums
    samples: int = 0
    corrupt: int = 0
    corrupt_names: List[str] = field(default_factory=list)

    @classmethod
    def empty(cls, edges: InputEdges, indices: Sequence[int]) -> "LiveSums":
        return cls(edges.empty(), ActivationSums.empty(indices))

    def add_sample(self, model, sample: Sequence[np.ndarray], edges: InputEdges,
                   ranges: Dict[int, Tuple[float, float]]) -> None:
        model.run(sample, kind="debug")
        self.activations.add(model.tensor_values(list(self.activations.minmax)), ranges)
        add_input(self.inputs, sample, edges)
        self.samples += 1

    def add_corrupt(self, name: str, error: str) -> None:
        self.corrupt += 1
        self.corrupt_names = sorted(self.corrupt_names + [f"{name}: {error}"])[:MAX_NAMED]  # the same whatever the order

    def merge(self, other: "LiveSums") -> None:
        for a, b in zip(self.inputs, other.inputs):
            a.merge(b)
        self.activations.merge(other.activations)
        self.samples += other.samples
        self.corrupt += other.corrupt
        self.corrupt_names = sorted(self.corrupt_names + other.corrupt_names)[:MAX_NAMED]


@dataclass
class HistogramSums:
    """Pass 2 (``--effect``): live activation histograms on the merged live [min, max] of pass 1."""

    limits: Dict[int, Tuple[float, float]]
    hists: Dict[int, np.ndarray]
    counts: Dict[int, int]

    @classmethod
    def empty(cls, limits: Dict[int, Tuple[float, float]]) -> "HistogramSums":
        return cls(dict(limits), {i: np.zeros(NUM_BINS, np.int64) for i in limits}, {i: 0 for i in limits})

    def add_sample(self, model, sample: Sequence[np.ndarray]) -> None:
        model.run(sample, kind="debug")
        for i, v in model.tensor_values(list(self.limits)).items():
            lo, hi = self.limits[i]
            self.hists[i] += _histogram(v, lo, hi)
            self.counts[i] += int(v.size)

    def merge(self, other: "HistogramSums") -> None:
        for i in self.hists:
            self.hists[i] += other.hists[i]
            self.counts[i] += other.counts[i]

    def stats(self, names: Dict[int, str]) -> Dict[int, TensorStats]:
        """What ``collect_statistics`` returns for the same samples."""
        return {i: TensorStats(i, names[i], lo, hi, self.hists[i], self.counts[i]) for i, (lo, hi) in self.limits.items()}
