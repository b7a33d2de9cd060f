"""Diagnose a preprocessing mismatch when both pipelines are black boxes (user code, tensor folders).

Nothing can be perturbed, so each side is *described* from its output tensors and the decoded image:

1. layout: NCHW vs NHWC from the tensor shapes (channels 1/3/4 on one end only);
2. channel order: which decoded channel feeds each output channel (RGB, BGR, gray), fitted;
3. value stage: a per-channel affine map ``value = a * pixel + b`` fitted by least squares against
   the decoded image resized like the pipeline, reported as mean/std terms (snapped to a known
   preset - ImageNet, -1..1, 0..1, ... - when within 1 %) and as a value range;
4. resampling: when a difference remains after 1-3 (PSNR below ``RESAMPLING_DB``), the decoded
   image is re-resized with every method x library x antialias edgekit knows (Pillow, OpenCV) and
   the variant that reproduces each side best is kept.

The candidate is then corrected towards the reference one explanation at a time (layout, channel
order or color, value stage, resampling) and PSNR (against the reference's value range) is
measured before and after each, so every cause states how much of the difference it removes. An
explanation counts as a cause only when the two sides really differ in it and fixing it helps; two
identical pipelines give no cause. The fix is the reference's inferred spec (with the library).
"""
from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np

from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.preprocessing.base import Result
from edgekit.preprocessing.parity import ImageDiff, Units, squeeze_batch

log = logging.getLogger(__name__)

MAX_IMAGES = 3
RESAMPLING_DB = 45.0  # a residual below this after layout/color/values is searched as resampling
EXPLAINED_DB = 40.0  # the default parity gate: after the fixes the two sides agree
MIN_GAIN_DB = 0.5  # an explanation must raise PSNR at least this much to be named
AFFINE_RTOL = 0.02  # value stages closer than this (relative, per channel) are the same
TIE_RTOL = 0.02  # resampling variants whose fit errors are this close cannot be told apart

# (implementation, resize, antialias, options): what re-resizing tries, Pillow first (ties keep it)
RESIZE_VARIANTS: Tuple[Tuple[str, str, bool, Tuple[Tuple[str, str], ...]], ...] = (
    ("pillow", "bilinear", True, ()),
    ("pillow", "bilinear", False, ()),
    ("pillow", "bicubic", True, ()),
    ("pillow", "bicubic", False, ()),
    ("pillow", "nearest", True, ()),
    ("pillow", "box", True, ()),
    ("pillow", "lanczos", True, ()),
    ("opencv", "bilinear", False, ()),
    ("opencv", "bicubic", False, ()),
    ("opencv", "box", True, ()),
    ("opencv", "lanczos", False, ()),
    ("opencv", "nearest", True, (("nearest", "legacy"),)),
)
OPENCV_FLAGS = {"bilinear": "cv2.INTER_LINEAR", "bicubic": "cv2.INTER_CUBIC", "box": "cv2.INTER_AREA",
                "lanczos": "cv2.INTER_LANCZOS4", "nearest": "cv2.INTER_NEAREST"}


@dataclass(frozen=True)
class Variant:
    """How the decoded image is brought to the tensor size: geometry + method + library."""

    impl: str = "pillow"
    resize: str = "bilinear"
    antialias: bool = True
    options: Tuple[Tuple[str, str], ...] = ()
    shorter_side: Optional[int] = None  # None: resize straight to the tensor size
    crop: bool = False

    def text(self) -> str:
        if self.impl == "opencv":
            how = OPENCV_FLAGS[self.resize]
        elif self.resize == "nearest":
            how = "nearest"
        else:
            how = f"{self.resize} {'with' if self.antialias else 'without'} antialias"
        lib = "OpenCV" if self.impl == "opencv" else "Pillow"
        geometry = f", shorter side {self.shorter_side} + center crop" if self.shorter_side else ""
        return f"{lib} {how}{geometry}"


@dataclass
class SideFit:
    """What one pipeline does, as far as its tensors tell."""

    layout: str  # NCHW | NHWC | HW
    tensors: List[np.ndarray]  # canonical HWC float64
    mapping: Tuple[int, ...] = (0, 1, 2)  # decoded channel (RGB or gray) feeding each output channel
    a: np.ndarray = field(default_factory=lambda: np.ones(1))
    b: np.ndarray = field(default_factory=lambda: np.zeros(1))
    variant: Variant = Variant()
    fit_psnr: float = math.nan
    equivalent: List[str] = field(default_factory=list)

    @property
    def channels(self) -> int:
        return self.tensors[0].shape[-1]

    @property
    def color(self) -> str:
        if self.channels == 1:
            return "grayscale"
        return "".join("RGB"[i] for i in self.mapping)

    def spec(self, name: str) -> PreprocessSpec:
        """The inferred pipeline as a spec (mean/std in output channel order on 0..1 pixels)."""
        h, w = self.tensors[0].shape[:2]
        std = tuple(float(1.0 / (255.0 * a)) for a in self.a)
        mean = tuple(float(-b * s) for b, s in zip(self.b, std))
        mean, std = _snap(mean, std)
        color = {"RGB": "rgb", "BGR": "bgr", "grayscale": "grayscale"}.get(self.color, "rgb")
        v = self.variant
        geometry = dict(shorter_side=v.shorter_side, crop=(h, w)) if v.shorter_side else dict(size=(h, w))
        return PreprocessSpec(name=name, color=color, resize=v.resize, antialias=v.antialias, scale=1.0 / 255.0,
                              mean=mean, std=std, layout="NCHW" if self.layout == "NCHW" else "NHWC", **geometry)


# ------------------------------------------------------------------ tensors
def detect_layout(array: np.ndarray, hint: Optional[str] = None) -> str:
    """NCHW, NHWC or HW (one channel without a channel axis) from a tensor without batch axis."""
    if array.ndim == 2:
        return "HW"
    first, last = array.shape[0] in (1, 3, 4), array.shape[-1] in (1, 3, 4)
    if first and not last:
        return "NCHW"
    if last and not first:
        return "NHWC"
    return hint if hint in ("NCHW", "NHWC") else "NHWC"


def canonical(array: np.ndarray, layout: str) -> np.ndarray:
    array = np.asarray(array, np.float64)
    if layout == "HW":
        return array[:, :, None]
    return array.transpose(1, 2, 0) if layout == "NCHW" else array


def psnr(reference: Sequence[np.ndarray], candidate: Sequence[np.ndarray], peak: float) -> Optional[float]:
    """PSNR of the candidate against the reference (None when the shapes differ)."""
    if any(r.shape != c.shape for r, c in zip(reference, candidate)):
        return None
    sq = sum(float(np.sum((np.asarray(c, np.float64) - np.asarray(r, np.float64)) ** 2)) for r, c in zip(reference, candidate))
    mse = sq / max(sum(r.size for r in reference), 1)
    if mse == 0:
        return math.inf
    return 10.0 * math.log10(peak * peak / mse) if peak > 0 else math.nan


def value_range(tensors: Sequence[np.ndarray]) -> dict:
    lo = min(float(t.min()) for t in tensors)
    hi = max(float(t.max()) for t in tensors)
    if lo >= -1e-6 and hi <= 1.0 + 1e-6:
        name = "0..1"
    elif lo >= -1e-6 and hi <= 255.0 + 1e-6 and hi > 2.0:
        name = "0..255"
    elif lo >= -1.0 - 1e-6 and hi <= 1.0 + 1e-6:
        name = "-1..1"
    elif lo >= -128.5 and hi <= 127.5 and float(np.mean([t.mean() for t in tensors])) < 0:
        name = "int8 steps (-128..127)"
    else:
        name = f"standardized ({lo:.3g}..{hi:.3g})"
    return {"min": lo, "max": hi, "range": name}


# ------------------------------------------------------------------ fitting
def _snap(mean: Tuple[float, ...], std: Tuple[float, ...]) -> Tuple[Tuple[float, ...], Tuple[float, ...]]:
    """Known presets when within 1 % (in affine terms), else rounded constants."""
    from edgekit.preprocessing.diagnose import PRESETS, _affine

    n = len(mean)
    a, b = _affine(1 / 255, mean, std, n)
    for _name, scale, pm, ps in PRESETS:
        if len(pm) not in (1, n) or len(ps) not in (1, n):
            continue
        pa, pb = _affine(scale, pm, ps, n)
        if np.all(np.abs(pa - a) <= 0.01 * np.abs(pa)) and np.all(np.abs(pb - b) <= 0.01 * np.abs(pa) * 255):
            pm_, ps_ = np.broadcast_to(pm, (n,)) * (1 / 255) / scale, np.broadcast_to(ps, (n,)) * (1 / 255) / scale
            return tuple(float(round(v, 6)) for v in pm_), tuple(float(round(v, 6)) for v in ps_)
    return tuple(round(v, 4) for v in mean), tuple(round(v, 4) for v in std)


def fit_affine(tensors: Sequence[np.ndarray], raw: Sequence[np.ndarray], mapping: Sequence[int]
               ) -> Tuple[np.ndarray, np.ndarray, float]:
    """Per output channel least squares tensor[..., c] = a * raw[..., mapping[c]] + b; sum of squares left."""
    a, b, sse = [], [], 0.0
    for c, source in enumerate(mapping):
        x = np.concatenate([r[..., source].ravel() for r in raw])
        y = np.concatenate([t[..., c].ravel() for t in tensors])
        if x.std() < 1e-9:
            slope, intercept = 0.0, float(y.mean())
        else:
            slope, intercept = np.polyfit(x, y, 1)
        a.append(slope)
        b.append(intercept)
        sse += float(np.sum((y - (slope * x + intercept)) ** 2))
    return np.asarray(a), np.asarray(b), sse


class Decoded:
    """The decoded images re-resized per variant (cached), via edgekit's Pillow/OpenCV implementations."""

    def __init__(self, images: Sequence[Path]) -> None:
        from edgekit.preprocessing.diagnose import Evaluator

        self.images = list(images)
        self.evaluator = Evaluator(self.images, [], Units.for_spec(None))
        self.shapes: Optional[List[Tuple[int, int]]] = None

    def source_hw(self) -> List[Tuple[int, int]]:
        if self.shapes is None:
            from PIL import Image, ImageOps

            self.shapes = []
            for p in self.images:
                with Image.open(p) as img:
                    self.shapes.append(ImageOps.exif_transpose(img).size[::-1])
        return self.shapes

    def pixels(self, variant: Variant, hw: Tuple[int, int], gray: bool) -> Optional[List[np.ndarray]]:
        from edgekit.preprocessing.diagnose import State

        geometry = dict(shorter_side=variant.shorter_side, crop=hw) if variant.shorter_side else dict(size=hw)
        spec = PreprocessSpec(name="probe", color="grayscale" if gray else "rgb", resize=variant.resize,
                              antialias=variant.antialias, **geometry)
        raw = self.evaluator.raw(State(spec, variant.impl, variant.options))
        if raw is None:
            return None
        out = [np.asarray(r, np.float64).reshape(r.shape[0], r.shape[1], -1) for r in raw]
        return out if all(r.shape[:2] == tuple(hw) for r in out) else None


def _geometries(decoded: Decoded, hw: Tuple[int, int]) -> List[Variant]:
    """Straight resize; for images of another aspect ratio also shorter side + center crop."""
    out = [Variant()]
    aspects = {round(w / h, 2) for h, w in decoded.source_hw()}
    if aspects != {round(hw[1] / hw[0], 2)}:
        for side in sorted({min(hw), int(round(min(hw) / 0.875))}):
            out.append(Variant(shorter_side=side, crop=True))
    return out


def fit_side(tensors: List[np.ndarray], layout: str, decoded: Decoded, search_resize: bool,
             start: Optional[SideFit] = None) -> SideFit:
    """Channel mapping and value stage (fitted on Pillow bilinear), then optionally the resampling."""
    hw = tensors[0].shape[:2]
    gray = tensors[0].shape[-1] == 1
    side = start or SideFit(layout, tensors)
    if start is None:
        best = None
        for geometry in _geometries(decoded, hw):
            raw = decoded.pixels(geometry, hw, gray)
            if raw is None:
                continue
            mappings = [(0,)] * 1 if gray else list(itertools.permutations(range(3)))
            for mapping in mappings:
                if not gray and side.channels != 3:
                    continue
                a, b, sse = fit_affine(tensors, raw, mapping)
                if best is None or sse < best[0] * (0.9 if mapping != (0, 1, 2) else 1.0):
                    best = (sse, mapping, a, b, geometry)
        if best is None:
            return side
        _, side.mapping, side.a, side.b, side.variant = best
    if search_resize:
        fits = []
        for impl, method, aa, options in RESIZE_VARIANTS:
            variant = replace(side.variant, impl=impl, resize=method, antialias=aa, options=options)
            raw = decoded.pixels(variant, hw, gray)
            if raw is not None:
                fits.append((fit_affine(tensors, raw, side.mapping), variant))
        if fits:
            fits.sort(key=lambda f: f[0][2])
            (a, b, sse), variant = fits[0]
            side.a, side.b, side.variant = a, b, variant
            side.equivalent = [v.text() for (_, _, s), v in fits[1:] if s <= sse * (1 + TIE_RTOL) + 1e-12]
    raw = decoded.pixels(side.variant, hw, gray)
    if raw is not None:
        recon = [side.a * r[..., list(side.mapping)] + side.b for r in raw]
        span = max(float(t.max() - t.min()) for t in tensors) or 1.0
        side.fit_psnr = psnr(tensors, recon, span) or math.nan
    return side


# ------------------------------------------------------------------ explanation chain
def _same_affine(a0, b0, a1, b1) -> bool:
    a0, b0, a1, b1 = (np.broadcast_to(np.asarray(v, np.float64), (max(len(a0), len(a1)),)) for v in (a0, b0, a1, b1))
    span = np.abs(a1) * 255.0
    return bool(np.all(np.abs(a0 - a1) <= AFFINE_RTOL * np.abs(a1)) and np.all(np.abs(b0 - b1) <= AFFINE_RTOL * span))


def _only_range(a0, b0, a1, b1) -> bool:
    ratio = np.asarray(a1) / np.asarray(a0)
    if not np.allclose(ratio, ratio.flat[0], rtol=AFFINE_RTOL) or np.isclose(ratio.flat[0], 1.0, rtol=AFFINE_RTOL):
        return False
    return bool(np.allclose(b1, np.asarray(b0) * ratio, atol=AFFINE_RTOL * float(np.abs(a1).max()) * 255))


def describe_values(side: SideFit) -> str:
    from edgekit.preprocessing.diagnose import describe_values as preset_name

    spec = side.spec("x")
    mean = ", ".join(f"{v:.4g}" for v in spec.mean)
    std = ", ".join(f"{v:.4g}" for v in spec.std)
    name = preset_name(spec)
    extra = f" ({name})" if not name.startswith("scale ") else ""
    return f"mean {mean}, std {std} on 0..1 pixels{extra}"


def explain(ref: SideFit, cand: SideFit, raw_ref: List[np.ndarray], decoded: Decoded, peak: float,
            initial: Optional[float]) -> Tuple[List[dict], float, List[np.ndarray]]:
    """Correct the candidate towards the reference one explanation at a time; causes with PSNR."""
    causes: List[dict] = []
    hw = ref.tensors[0].shape[:2]
    work = [t.copy() for t in cand.tensors]
    before = initial
    a_c, b_c = cand.a, cand.b

    def step(family: str, reference: str, candidate: str, after: Optional[float], real: bool, fixed: str) -> None:
        nonlocal before
        gain = (after - before) if (after is not None and before is not None) else math.nan
        fixed_shape = before is None and after is not None
        if real and (fixed_shape or gain >= MIN_GAIN_DB):
            causes.append({
                "family": family, "reference": reference, "candidate": candidate,
                "description": f"{family}: the candidate uses {candidate}, the reference {reference}",
                "psnr_before_db": before, "psnr_after_db": after, "removed": gain if not math.isnan(gain) else 0.0,
                "fixed_shape": fixed_shape, "fix": fixed,
            })
        before = after

    # 1. layout
    if ref.layout != cand.layout and "HW" not in (ref.layout, cand.layout):
        step("layout", ref.layout, cand.layout, psnr(ref.tensors, work, peak), True,
             f"lay the tensor out as {ref.layout}")
    else:
        before = psnr(ref.tensors, work, peak) if before is None else before
    # 2. channel order / color
    if ref.channels == 3 and cand.channels == 3 and ref.mapping != cand.mapping:
        order = [cand.mapping.index(src) for src in ref.mapping]
        work = [w[..., order] for w in work]
        a_c, b_c = a_c[order], b_c[order]
        step("channel order", ref.color, cand.color, psnr(ref.tensors, work, peak), True,
             f"feed the channels in {ref.color} order")
    elif ref.channels != cand.channels:
        pixels = decoded.pixels(cand.variant, hw, gray=ref.channels == 1)
        if pixels is not None:
            n = ref.channels
            a_c = np.broadcast_to(a_c.mean() if len(a_c) != n else a_c, (n,)).copy()
            b_c = np.broadcast_to(b_c.mean() if len(b_c) != n else b_c, (n,)).copy()
            work = [a_c * p[..., list(ref.mapping)] + b_c for p in pixels]
            step("color", "RGB" if ref.channels == 3 else "grayscale", "RGB" if cand.channels == 3 else "grayscale",
                 psnr(ref.tensors, work, peak), True,
                 f"convert to {'RGB' if ref.channels == 3 else 'grayscale'} ({ref.color} order)")
    # 3. value stage
    if len(a_c) == ref.channels and not _same_affine(a_c, b_c, ref.a, ref.b):
        work = [ref.a * (w - b_c) / a_c + ref.b for w in work]
        family = "value range" if _only_range(a_c, b_c, ref.a, ref.b) else "normalization constants"
        step(family, describe_values(ref), describe_values(replace(cand, a=a_c, b=b_c, mapping=ref.mapping)),
             psnr(ref.tensors, work, peak), True, "normalize with " + describe_values(ref))
    # 4. resampling
    if ref.variant != cand.variant and raw_ref is not None:
        raw_cand = decoded.pixels(cand.variant, hw, ref.channels == 1)
        if raw_cand is not None and all(x.shape == y.shape for x, y in zip(raw_ref, raw_cand)):
            m = list(ref.mapping)
            work = [w + ref.a * (r[..., m] - c[..., m]) for w, r, c in zip(work, raw_ref, raw_cand)]
            differs = [name for name, x, y in (("resize method", ref.variant.resize, cand.variant.resize),
                                                ("antialias", ref.variant.antialias, cand.variant.antialias),
                                                ("library", ref.variant.impl, cand.variant.impl),
                                                ("output size", ref.variant.shorter_side, cand.variant.shorter_side))
                       if x != y]
            family = ("resize method" if ref.variant.resize != cand.variant.resize else
                      "antialias" if ref.variant.antialias != cand.variant.antialias else
                      "output size" if ref.variant.shorter_side != cand.variant.shorter_side else "library")
            step(family, ref.variant.text(), cand.variant.text(), psnr(ref.tensors, work, peak), True,
                 f"resize with {ref.variant.text()}")
            if causes and causes[-1]["family"] == family:
                causes[-1]["differs_in"] = differs
    return causes, before if before is not None else math.nan, work


def _edge_share(ref: SideFit, work: List[np.ndarray]) -> float:
    """Correlation of the residual's magnitude with the reference's gradient (resampling sits on edges)."""
    xs, ys = [], []
    for r, w in zip(ref.tensors, work):
        if r.shape != w.shape:
            return math.nan
        g = np.abs(np.diff(r, axis=0, prepend=r[:1])) + np.abs(np.diff(r, axis=1, prepend=r[:, :1]))
        xs.append(g.ravel())
        ys.append(np.abs(w - r).ravel())
    x, y = np.concatenate(xs), np.concatenate(ys)
    if x.std() < 1e-12 or y.std() < 1e-12:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1])


def diagnose_black_box(images: Sequence[Path], reference_results: Sequence[Result], candidate_results: Sequence[Result],
                       diffs: Sequence[ImageDiff]) -> dict:
    """Describe both sides from their tensors and the decoded images; name what differs, with PSNR."""
    chosen = [i for i, d in enumerate(diffs) if d.status in ("compared", "shape_mismatch")]
    chosen.sort(key=lambda i: (-(math.inf if diffs[i].status == "shape_mismatch" else diffs[i].metrics.get("mean_abs", 0.0)), i))
    chosen = chosen[:MAX_IMAGES]
    if not chosen:
        return {"available": False, "reason": "no image was processed by both pipelines"}
    ref_raw = [squeeze_batch(reference_results[i]) for i in chosen]
    cand_raw = [squeeze_batch(candidate_results[i]) for i in chosen]
    if any(t.ndim not in (2, 3) for t in ref_raw + cand_raw):
        return {"available": False, "reason": "the tensors are not images (expected HxW, CxHxW or HxWxC)"}
    ref_layout = detect_layout(ref_raw[0])
    cand_layout = detect_layout(cand_raw[0], hint=ref_layout)
    ref_layout = detect_layout(ref_raw[0], hint=cand_layout)
    ref_t = [canonical(t, ref_layout) for t in ref_raw]
    cand_t = [canonical(t, cand_layout) for t in cand_raw]
    if ref_t[0].shape[:2] != cand_t[0].shape[:2]:
        return {"available": False, "reason": f"the tensors have different image sizes: reference {ref_t[0].shape[:2]}, "
                f"candidate {cand_t[0].shape[:2]} (after reading the layout)"}
    if ref_t[0].shape[-1] not in (1, 3) or cand_t[0].shape[-1] not in (1, 3):
        return {"available": False, "reason": "only 1- and 3-channel tensors are diagnosed"}
    decoded = Decoded([Path(images[i]) for i in chosen])
    peak = max(float(t.max() - t.min()) for t in ref_t) or 1.0
    initial = psnr(ref_raw, cand_raw, peak)

    ref = fit_side(ref_t, ref_layout, decoded, search_resize=False)
    cand = fit_side(cand_t, cand_layout, decoded, search_resize=False)
    raw_ref = decoded.pixels(ref.variant, ref_t[0].shape[:2], ref.channels == 1)
    causes, final, work = explain(ref, cand, raw_ref, decoded, peak, initial)
    residual_before_resampling = final
    edge = _edge_share(ref, work)
    searched = False
    if final is not None and final < RESAMPLING_DB:
        searched = True
        ref = fit_side(ref_t, ref_layout, decoded, search_resize=True, start=ref)
        cand = fit_side(cand_t, cand_layout, decoded, search_resize=True, start=cand)
        raw_ref = decoded.pixels(ref.variant, ref_t[0].shape[:2], ref.channels == 1)
        causes, final, work = explain(ref, cand, raw_ref, decoded, peak, initial)
    explained = final is not None and (math.isinf(final) or final >= EXPLAINED_DB)
    fix_spec = ref.spec("reference (inferred)")
    fix_impl = ref.variant.impl
    result = {
        "available": True,
        "mode": "black box",
        "perturbed": "neither (both sides described from their tensors and the decoded images)",
        "images": [Path(images[i]).name for i in chosen],
        "units": "dB PSNR",
        "initial_psnr_db": initial,
        "final_psnr_db": final,
        "initial_mean_abs": _mean_abs(ref_t, cand_t),
        "residual_mean_abs": _mean_abs(ref_t, work),
        "explained": explained,
        "causes": causes,
        "steps": [],
        "evaluations": len(decoded.evaluator.raw_cache),
        "residual": {"psnr_db_after_layout_color_values": residual_before_resampling,
                     "edge_correlation": edge, "resampling_searched": searched},
        "sides": {"reference": _side_json(ref), "candidate": _side_json(cand)},
        "fix": {"implementation": fix_impl, "spec": fix_spec.to_dict(),
                "text": f"make the candidate produce {fix_impl}:spec.json with " + _spec_text(ref)},
    }
    result["summary"] = _summary(causes, explained, initial, final, result["fix"]["text"])
    return result


def _mean_abs(ref: Sequence[np.ndarray], cand: Sequence[np.ndarray]) -> float:
    if any(r.shape != c.shape for r, c in zip(ref, cand)):
        return math.inf
    return float(np.mean([np.mean(np.abs(r - c)) for r, c in zip(ref, cand)]))


def _side_json(side: SideFit) -> dict:
    spec = side.spec("inferred")
    return {"layout": side.layout, "channels": side.color, "values": describe_values(side),
            "value_range": value_range(side.tensors), "resize": side.variant.text(),
            "indistinguishable_from": side.equivalent, "spec": spec.to_dict(), "implementation": side.variant.impl,
            "fit_psnr_db": side.fit_psnr}


def _spec_text(side: SideFit) -> str:
    h, w = side.tensors[0].shape[:2]
    return (f"{side.color} channels, {side.variant.text()} to {h}x{w}, {describe_values(side)}, "
            f"layout {side.layout if side.layout != 'HW' else 'HW (no channel axis)'}")


def _fmt(db: Optional[float]) -> str:
    if db is None:
        return "n/a (shapes differ)"
    return "inf" if math.isinf(db) else f"{db:.1f} dB"


def _summary(causes: List[dict], explained: bool, initial: Optional[float], final: Optional[float], fix: str) -> str:
    if not causes:
        if initial is not None and math.isinf(initial):
            return "no difference: the tensors are identical"
        return (f"no known mismatch explains the difference (PSNR {_fmt(initial)}): channel order, layout, value "
                "range, normalization and resampling agree; the candidate differs in a way edgekit does not try "
                "(custom code, augmentation, a different image?)")
    names = "; ".join(f"{c['description']} (PSNR {_fmt(c['psnr_before_db'])} -> {_fmt(c['psnr_after_db'])})" for c in causes)
    head = "explained" if explained else "partly explained"
    return f"{head} (PSNR {_fmt(initial)} -> {_fmt(final)}) by: {names}. Fix: {fix}"
