"""Pillow's 8-bit resampling algorithm (libImaging/Resample.c and Geometry.c), in numpy.

Used where Pillow itself cannot be called: the reference for ``antialias: false`` (the same
algorithm with the kernel not widened when downscaling, i.e. plain interpolation at half-pixel
centers) and the coefficient tables of the generated C code. With ``antialias=True`` it is
bit-exact with ``PIL.Image.resize`` (tested on every method and on real photographs).

Pillow's algorithm, per axis: for output index i, center = (i + 0.5) * in/out; support =
filter_support * max(in/out, 1) (antialias) or filter_support (no antialias); taps
[int(center - support + 0.5), int(center + support + 0.5)) clipped to the image; weights
filter((x - center + 0.5) / filterscale) normalized to sum 1, then to int32 fixed point with 22
fraction bits (rounded half away from zero). 8-bit images: the horizontal pass first, rounded
to uint8 (clip(acc + 2^21 >> 22)), then the vertical pass; a pass is skipped when that side
keeps its size. Pillow 13 runs the vertical pass first for some sizes (see pillow_pass_order). NEAREST is Pillow's affine scaling: source index = int(a * (i + 0.5)) with the
position accumulated in double precision as Geometry.c does.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, Dict, Tuple

import numpy as np

PRECISION_BITS = 32 - 8 - 2


def _box(x: float) -> float:
    return 1.0 if -0.5 < x <= 0.5 else 0.0


def _bilinear(x: float) -> float:
    x = abs(x)
    return 1.0 - x if x < 1.0 else 0.0


def _hamming(x: float) -> float:
    x = abs(x)
    if x == 0.0:
        return 1.0
    if x >= 1.0:
        return 0.0
    x = x * math.pi
    # Pillow writes 0.54f and 0.46f: single-precision constants promoted to double
    return math.sin(x) / x * (float(np.float32(0.54)) + float(np.float32(0.46)) * math.cos(x))


def _bicubic(x: float) -> float:
    a = -0.5
    x = abs(x)
    if x < 1.0:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    if x < 2.0:
        return (((x - 5) * x + 8) * x - 4) * a
    return 0.0


def _sinc(x: float) -> float:
    if x == 0.0:
        return 1.0
    x = x * math.pi
    return math.sin(x) / x


def _lanczos(x: float) -> float:
    return _sinc(x) * _sinc(x / 3) if -3.0 <= x < 3.0 else 0.0


FILTERS: Dict[str, Tuple[Callable[[float], float], float]] = {
    "box": (_box, 0.5),
    "bilinear": (_bilinear, 1.0),
    "hamming": (_hamming, 1.0),
    "bicubic": (_bicubic, 2.0),
    "lanczos": (_lanczos, 3.0),
}


@dataclass(frozen=True)
class AxisCoefficients:
    """One axis of a resize: per output index the first source index, tap count and int32 weights."""

    start: np.ndarray  # (out,) int
    count: np.ndarray  # (out,) int
    weights: np.ndarray  # (out, ksize) int32, zero beyond count
    float_weights: np.ndarray  # (out, ksize) float64 normalized weights (before fixed point)

    @property
    def ksize(self) -> int:
        return int(self.weights.shape[1])

    def subset(self, indices: np.ndarray, first_source: int = 0) -> "AxisCoefficients":
        """Only the outputs ``indices``, with source indices shifted down by ``first_source``."""
        return AxisCoefficients(self.start[indices] - first_source, self.count[indices], self.weights[indices],
                                self.float_weights[indices])


@functools.lru_cache(maxsize=512)
def axis_coefficients(in_size: int, out_size: int, method: str, *, antialias: bool = True) -> AxisCoefficients:
    """Pillow's precompute_coeffs + normalize_coeffs_8bpc for one axis (cached; do not modify)."""
    fn, filter_support = FILTERS[method]
    scale = float(in_size) / out_size
    filterscale = max(scale, 1.0) if antialias else 1.0
    support = filter_support * filterscale
    ksize = int(math.ceil(support)) * 2 + 1
    ss = 1.0 / filterscale
    start = np.zeros(out_size, np.int64)
    count = np.zeros(out_size, np.int64)
    kk = np.zeros((out_size, ksize), np.float64)
    for xx in range(out_size):
        center = (xx + 0.5) * scale
        xmin = max(int(center - support + 0.5), 0)
        xmax = min(int(center + support + 0.5), in_size) - xmin
        w = [fn((x + xmin - center + 0.5) * ss) for x in range(xmax)]
        total = _sum_in_order(w)  # in order, like the C loop
        if total != 0.0:
            w = [v / total for v in w]
        kk[xx, :xmax] = w
        start[xx], count[xx] = xmin, max(xmax, 0)
    fixed = np.where(kk < 0, np.trunc(-0.5 + kk * (1 << PRECISION_BITS)), np.trunc(0.5 + kk * (1 << PRECISION_BITS)))
    return AxisCoefficients(start, count, fixed.astype(np.int32), kk)


def _sum_in_order(values) -> float:
    total = 0.0
    for v in values:
        total += v
    return total


def _pass(pixels: np.ndarray, coeffs: AxisCoefficients, axis: int) -> np.ndarray:
    """One 8-bit convolution pass along ``axis`` (0: rows/vertical, 1: columns/horizontal)."""
    size = pixels.shape[axis]
    taps = coeffs.start[:, None] + np.arange(coeffs.ksize)[None, :]
    taps = np.minimum(taps, size - 1)  # weights beyond count are 0; keep the index in range
    gathered = np.take(pixels.astype(np.int32), taps, axis=axis)  # axis -> (out, ksize); int32 like Pillow
    weights = coeffs.weights
    if axis == 1:  # (H, out, k, C)
        acc = np.einsum("hokc,ok->hoc", gathered, weights)
    else:  # (out, k, W, C)
        acc = np.einsum("okwc,ok->owc", gathered, weights)
    acc += 1 << (PRECISION_BITS - 1)
    return np.clip(acc >> PRECISION_BITS, 0, 255).astype(np.uint8)


def _two_passes(pixels: np.ndarray, out_hw: Tuple[int, int], method: str, antialias: bool, order: str) -> np.ndarray:
    in_h, in_w = pixels.shape[:2]
    out_h, out_w = out_hw
    horizontal = (lambda p: _pass(p, axis_coefficients(in_w, out_w, method, antialias=antialias), axis=1)) if out_w != in_w else (lambda p: p)
    vertical = (lambda p: _pass(p, axis_coefficients(in_h, out_h, method, antialias=antialias), axis=0)) if out_h != in_h else (lambda p: p)
    return horizontal(vertical(pixels)) if order == "vh" else vertical(horizontal(pixels))


@functools.lru_cache(maxsize=256)
def pillow_pass_order(in_hw: Tuple[int, int], out_hw: Tuple[int, int], method: str) -> str:
    """'hv' (horizontal pass first) or 'vh': the order the installed Pillow uses for this resize.

    Pillow 13 resizes vertically first for some size combinations (python-pillow/Pillow#9549, "if
    height is scaled down significantly more than width"); the exact rule is version-specific, so
    it is measured: Pillow resizes a random probe image and the pass order that reproduces it bit
    for bit is the answer.
    """
    from PIL import Image

    if in_hw[0] == out_hw[0] or in_hw[1] == out_hw[1] or method == "nearest":
        return "hv"  # one pass (or none): the order cannot matter
    probe = np.random.default_rng(0).integers(0, 256, (in_hw[0], in_hw[1], 3), dtype=np.uint8)
    expected = np.asarray(Image.fromarray(probe).resize((out_hw[1], out_hw[0]), getattr(Image.Resampling, method.upper())))
    # compare on a few output rows only (random data: the orders disagree almost everywhere)
    rows = np.unique(np.linspace(0, out_hw[0] - 1, min(out_hw[0], 16)).round().astype(np.int64))
    vertical = axis_coefficients(in_hw[0], out_hw[0], method)
    horizontal = axis_coefficients(in_hw[1], out_hw[1], method)
    first = int(vertical.start[rows].min())
    last = int((vertical.start[rows] + vertical.count[rows]).max())
    hv = _pass(_pass(probe[first:last], horizontal, axis=1), vertical.subset(rows, first), axis=0)
    vh = _pass(_pass(probe, vertical.subset(rows), axis=0), horizontal, axis=1)
    matches = [order for order, result in (("hv", hv), ("vh", vh)) if np.array_equal(result, expected[rows])]
    if not matches:
        raise RuntimeError(f"Pillow's {method} resize {in_hw} -> {out_hw} matches neither pass order of edgekit's mirror")
    return matches[0]


def resize_uint8(pixels: np.ndarray, out_hw: Tuple[int, int], method: str, *, antialias: bool = True,
                 order: str | None = None) -> np.ndarray:
    """Resize an (H, W, C) uint8 image the way Pillow's Image.resize does (see the module docstring).

    ``order``: 'hv' or 'vh' pass order; default: Pillow's for antialias=True, 'hv' without antialias.
    """
    if pixels.dtype != np.uint8 or pixels.ndim != 3:
        raise ValueError("resize_uint8 needs an (H, W, C) uint8 array")
    in_h, in_w = pixels.shape[:2]
    out_h, out_w = out_hw
    if (in_h, in_w) == (out_h, out_w):
        return pixels.copy()
    if method == "nearest":
        rows, cols = nearest_indices(in_h, out_h), nearest_indices(in_w, out_w)
        return pixels[rows][:, cols]
    if order is None:
        order = pillow_pass_order((in_h, in_w), (out_h, out_w), method) if antialias else "hv"
    return _two_passes(pixels, (out_h, out_w), method, antialias, order)


def nearest_indices(in_size: int, out_size: int) -> np.ndarray:
    """Pillow's NEAREST (ImagingScaleAffine): position a*(i+0.5) accumulated in double, truncated."""
    a = float(in_size) / out_size
    pos = a * 0.5
    out = np.empty(out_size, np.int64)
    for i in range(out_size):
        out[i] = -1 if pos < 0.0 else int(pos)
        pos += a
    if out.min() < 0 or out.max() >= in_size:  # cannot happen for a plain downscale/upscale
        raise ValueError(f"nearest index out of range for {in_size} -> {out_size}")
    return out


def rgb_to_luma(rgb: np.ndarray) -> np.ndarray:
    """Pillow's RGB -> L: (R*19595 + G*38470 + B*7471 + 0x8000) >> 16 (ITU-R 601-2 luma)."""
    v = rgb.astype(np.int64)
    return ((v[..., 0] * 19595 + v[..., 1] * 38470 + v[..., 2] * 7471 + 0x8000) >> 16).astype(np.uint8)
