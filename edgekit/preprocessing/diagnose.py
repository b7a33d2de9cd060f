"""Name the cause of a preprocessing mismatch by trying the known ones.

The spec-driven side (the reference if it has a spec, else the candidate) is re-run under
perturbed specs/implementations; a perturbation that brings its tensors close to the other side's
explains (part of) the difference. A greedy search applies the best perturbation, then searches
again, until the remaining difference is within rounding (or nothing helps):

- layout (NCHW <-> NHWC), channel order (RGB <-> BGR)
- value range / normalization constants: known presets (0..1, 0..255, -1..1, ImageNet mean/std,
  Caffe BGR means) and constants fitted per channel by least squares on the images themselves
- resize method x antialias (Pillow's algorithm), output size / crop
- library semantics: the same spec through OpenCV, torchvision, TF; OpenCV/torchvision legacy
  NEAREST, TF's default fast JPEG IDCT
- decode: EXIF orientation, alpha handling, 16-bit conversion
- when both sides are specs: every field where the two specs differ

Differences are measured in input LSB (see parity.Units) over the worst images (at most 12).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from edgekit.errors import UserError
from edgekit.preprocessing.spec import RESIZE_METHODS, PreprocessSpec
from edgekit.preprocessing.base import ImageReadError, Preprocessor, Result, SpecPreprocessor, implementation
from edgekit.preprocessing.parity import ImageDiff, Units, squeeze_batch
from edgekit.preprocessing.values import to_tensor

log = logging.getLogger(__name__)

MAX_IMAGES = 12
MAX_ROUNDS = 8
EXPLAINED_LSB = 0.5  # residual mean difference accepted as rounding (the default parity gate)
MIN_GAIN = 0.9  # a step must cut the difference by at least 10 %
MIN_GAIN_LSB = 0.02

LIBRARIES: Tuple[Tuple[str, Tuple[Tuple[str, str], ...]], ...] = (
    ("pillow", ()),
    ("opencv", ()),
    ("torchvision", ()),
    ("tf", ()),
    ("opencv", (("nearest", "legacy"),)),
    ("torchvision", (("nearest", "legacy"),)),
    ("tf", (("jpeg_idct", "fast"),)),
)
LIBRARY_TEXT = {
    "pillow": "Pillow (PIL Image.resize, ImageOps.exif_transpose)",
    "opencv": "OpenCV (cv2.imdecode, cv2.cvtColor, cv2.resize)",
    "opencv[nearest=legacy]": "OpenCV INTER_NEAREST (floor(x * scale), not the nearest pixel center)",
    "torchvision": "torchvision tensor transforms (torch interpolate)",
    "torchvision[nearest=legacy]": "torchvision InterpolationMode.NEAREST (floor(x * scale))",
    "tf": "TensorFlow (tf.io.decode_*, tf.image.resize)",
    "tf[jpeg_idct=fast]": "TensorFlow's default JPEG decoder setting (INTEGER_FAST IDCT)",
}

# (name, scale, mean, std) in output channel order; mean/std in the scaled units
PRESETS: Tuple[Tuple[str, float, Tuple[float, ...], Tuple[float, ...]], ...] = (
    ("0..1 (x / 255)", 1 / 255, (0.0,), (1.0,)),
    ("0..255 (no scaling)", 1.0, (0.0,), (1.0,)),
    ("-1..1 (x / 127.5 - 1)", 1 / 255, (0.5,), (0.5,)),
    ("ImageNet mean/std (RGB order)", 1 / 255, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    ("ImageNet mean/std (BGR order)", 1 / 255, (0.406, 0.456, 0.485), (0.225, 0.224, 0.229)),
    ("Caffe mean subtraction (BGR means on 0..255)", 1.0, (103.939, 116.779, 123.68), (1.0,)),
    ("Caffe mean subtraction (RGB order)", 1.0, (123.68, 116.779, 103.939), (1.0,)),
    ("ImageNet mean/std on 0..255", 1.0, (123.675, 116.28, 103.53), (58.395, 57.12, 57.375)),
)


@dataclass(frozen=True)
class State:
    """A spec and the implementation (with options) running it."""

    spec: PreprocessSpec
    impl: str
    options: Tuple[Tuple[str, str], ...] = ()

    @property
    def library(self) -> str:
        return self.impl + (f"[{','.join(f'{k}={v}' for k, v in self.options)}]" if self.options else "")


@dataclass(frozen=True)
class Change:
    family: str
    state: State
    old: str
    new: str


def describe_values(spec: PreprocessSpec) -> str:
    for name, scale, mean, std in PRESETS:
        if _same_values(spec, scale, mean, std):
            return name
    return f"scale {spec.scale:.6g}, mean {[round(v, 4) for v in spec.mean]}, std {[round(v, 4) for v in spec.std]}"


def _affine(spec_scale: float, mean, std, channels: int) -> Tuple[np.ndarray, np.ndarray]:
    """value = a * pixel + b per channel."""
    mean = np.broadcast_to(np.asarray(mean, np.float64), (channels,))
    std = np.broadcast_to(np.asarray(std, np.float64), (channels,))
    return spec_scale / std, -mean / std


def _same_values(spec: PreprocessSpec, scale: float, mean, std, rtol: float = 0.01) -> bool:
    if len(mean) not in (1, spec.channels) or len(std) not in (1, spec.channels):
        return False
    a0, b0 = _affine(spec.scale, spec.mean, spec.std, spec.channels)
    a1, b1 = _affine(scale, mean, std, spec.channels)
    span = np.abs(a1) * 255.0
    return bool(np.all(np.abs(a0 - a1) <= rtol * np.abs(a1)) and np.all(np.abs(b0 - b1) <= rtol * span))


def _neutral(spec: PreprocessSpec) -> PreprocessSpec:
    """The spec with an identity value stage: raw pixels, working channel order, HWC, float32."""
    return spec.replace(scale=1.0, mean=(0.0,), std=(1.0,), dtype="float32", quant_scale=None,
                        quant_zero_point=None, quant_from_model=False,
                        color="rgb" if spec.color == "bgr" else spec.color, layout="NHWC")


def _traits(paths: Sequence[Path]) -> set:
    """Which decode rules can matter for these files: 'exif', 'alpha', '16bit' (header only)."""
    from PIL import Image

    traits = set()
    for path in paths:
        try:
            with Image.open(path) as img:
                if img.getexif().get(0x0112, 1) not in (1, None):
                    traits.add("exif")
                if img.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in img.info:
                    traits.add("alpha")
                if img.mode.startswith("I") or img.info.get("bits", 8) > 8 or _png_bit_depth(path) == 16:
                    traits.add("16bit")
        except Exception:  # unreadable: the pipelines report it
            continue
    return traits


def _png_bit_depth(path: Path) -> int:
    with open(path, "rb") as handle:
        head = handle.read(25)
    return head[24] if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) >= 25 else 8


class Evaluator:
    """Runs states on the chosen images; raw pixels cached per (library, geometry/decode spec), and
    Pillow decodes cached per decode rules (most perturbations only change what follows decoding)."""

    def __init__(self, images: Sequence[Path], target: Sequence[np.ndarray], units: Units) -> None:
        self.images = list(images)
        self.target = [squeeze_batch(t).astype(np.float64) for t in target]
        self.units = units
        self.raw_cache: Dict[Tuple, Optional[List[np.ndarray]]] = {}
        self.decoded: Dict[Tuple, Optional[List[np.ndarray]]] = {}
        self.traits = _traits(self.images)
        self.evaluations = 0

    def _pillow_raw(self, spec: PreprocessSpec) -> Optional[List[np.ndarray]]:
        from edgekit.preprocessing.decode import decode_pillow, to_working_color
        from edgekit.preprocessing.pillow_impl import resize_crop_pillow

        key = (spec.exif_orientation, spec.alpha, spec.background, spec.high_bit_depth)
        if key not in self.decoded:
            try:
                self.decoded[key] = [decode_pillow(p, spec) for p in self.images]
            except Exception as exc:  # noqa: BLE001 - any decode failure: this variant cannot run
                log.debug("diagnosis: decode failed: %s", exc)
                self.decoded[key] = None
        if self.decoded[key] is None:
            return None
        try:
            return [resize_crop_pillow(to_working_color(p, spec), spec).astype(np.float32) for p in self.decoded[key]]
        except UserError:
            return None

    def raw(self, state: State) -> Optional[List[np.ndarray]]:
        neutral = _neutral(state.spec)
        key = (state.impl, state.options, tuple(sorted(neutral.to_dict().items(), key=str)).__repr__())
        if key not in self.raw_cache:
            if state.impl == "pillow" and not state.options:
                self.raw_cache[key] = self._pillow_raw(neutral)
                return self.raw_cache[key]
            try:
                pipeline = implementation(state.impl, neutral, **dict(state.options))
                results = pipeline.run_many(self.images)
            except UserError as exc:
                log.debug("diagnosis: %s cannot run: %s", state.library, exc)
                results = None
            if results is not None and any(isinstance(r, ImageReadError) for r in results):
                results = None
            self.raw_cache[key] = results
        return self.raw_cache[key]

    def tensors(self, state: State) -> Optional[List[np.ndarray]]:
        raw = self.raw(state)
        if raw is None:
            return None
        return [to_tensor(r, state.spec) for r in raw]

    def distance(self, state: State) -> float:
        """Mean absolute difference in LSB (tensor units when no LSB is defined); inf on shape mismatch."""
        self.evaluations += 1
        tensors = self.tensors(state)
        if tensors is None:
            return math.inf
        total = count = 0.0
        for t, target in zip(tensors, self.target):
            if t.shape != target.shape:
                return math.inf
            diff = t.astype(np.float64) - target
            lsb = self.units.lsb(diff)
            values = lsb if lsb is not None else np.abs(diff)
            total += float(values.sum())
            count += values.size
        return total / max(count, 1)

    def fit_values(self, state: State) -> Optional[PreprocessSpec]:
        """Per-channel least squares target = a * pixel + b, as spec constants (preset when close)."""
        raw = self.raw(state)
        spec = state.spec
        if raw is None:
            return None
        plain = spec.replace(scale=1.0, mean=(0.0,), std=(1.0,), dtype="float32", quant_scale=None,
                             quant_zero_point=None, quant_from_model=False)
        xs = [to_tensor(r, plain).astype(np.float64) for r in raw]
        if any(x.shape != t.shape for x, t in zip(xs, self.target)):
            return None
        axis = 0 if spec.layout == "NCHW" else -1
        a, b = [], []
        for c in range(spec.channels):
            x = np.concatenate([np.take(v, c, axis=axis).ravel() for v in xs])
            y = np.concatenate([np.take(t, c, axis=axis).ravel() for t in self.target])
            if spec.quantized:  # fit in value units: undo the quantization of the target
                y = (y - spec.quant_zero_point) * spec.quant_scale
            if x.std() < 1e-6:
                return None
            slope, intercept = np.polyfit(x, y, 1)
            if abs(slope) < 1e-12:
                return None
            a.append(slope)
            b.append(intercept)
        a_arr, b_arr = np.asarray(a), np.asarray(b)
        for _name, scale, mean, std in PRESETS:
            if len(mean) in (1, spec.channels) and len(std) in (1, spec.channels):
                pa, pb = _affine(scale, mean, std, spec.channels)
                if np.all(np.abs(pa - a_arr) <= 0.01 * np.abs(pa)) and np.all(np.abs(pb - b_arr) <= 0.01 * np.abs(pa) * 255):
                    return spec.replace(scale=float(scale), mean=tuple(float(v) for v in mean), std=tuple(float(v) for v in std))
        std = tuple(float(spec.scale / v) for v in a_arr)
        mean = tuple(float(-bb * s) for bb, s in zip(b_arr, std))
        return spec.replace(mean=mean, std=std)


def _only_range_differs(a: PreprocessSpec, b: PreprocessSpec) -> bool:
    """True when two value stages differ by one overall factor (e.g. 0..1 vs 0..255), not by constants."""
    if a.channels != b.channels:
        return False
    a0, b0 = _affine(a.scale, a.mean, a.std, a.channels)
    a1, b1 = _affine(b.scale, b.mean, b.std, b.channels)
    ratio = a1 / a0
    if np.allclose(ratio, 1.0, rtol=0.01) or not np.allclose(ratio, ratio[0], rtol=0.01):
        return False
    return bool(np.allclose(b1, b0 * ratio, atol=0.01 * float(np.abs(a1).max()) * 255))


def _resizes(spec: PreprocessSpec) -> bool:
    return bool(spec.size or spec.shorter_side)


def candidate_changes(state: State, other: Optional[State], target_hw: Optional[Tuple[int, int]],
                      evaluator: Evaluator, done: set) -> List[Change]:
    spec, changes = state.spec, []

    def add(family: str, new_spec: PreprocessSpec = None, old: str = "", new: str = "", impl=None, options=None):
        if family in done and family != "normalization constants":
            return
        new_state = State(new_spec or spec, impl or state.impl, state.options if options is None else options)
        if new_state != state:
            changes.append(Change(family, new_state, old, new))

    flip = "NHWC" if spec.layout == "NCHW" else "NCHW"
    add("layout", spec.replace(layout=flip), spec.layout, flip)
    if spec.channels == 3:
        order = "bgr" if spec.color == "rgb" else "rgb"
        add("channel order", spec.replace(color=order), spec.color.upper(), order.upper())
    fitted = evaluator.fit_values(state)
    if fitted is not None and not _same_values(spec, fitted.scale, fitted.mean, fitted.std, rtol=1e-4):
        add("normalization constants", fitted, describe_values(spec), describe_values(fitted))
    for name, scale, mean, std in PRESETS:
        if len(mean) in (1, spec.channels) and not _same_values(spec, scale, mean, std):
            preset = spec.replace(scale=float(scale), mean=tuple(mean), std=tuple(std))
            add("normalization constants", preset, describe_values(spec), name)
    if _resizes(spec):
        for method in RESIZE_METHODS:
            for aa in ((True,) if method == "nearest" else (True, False)):
                if (method, aa) != (spec.resize, spec.antialias if method != "nearest" else True):
                    family = "antialias" if method == spec.resize else "resize method"
                    add(family, spec.replace(resize=method, antialias=aa), _resize_text(spec),
                        _resize_text(spec.replace(resize=method, antialias=aa)))
    for impl, options in LIBRARIES:
        if (impl, options) != (state.impl, state.options) and not (impl == "pillow" and state.impl == "c"):
            add("library", None, state.library, State(spec, impl, options).library, impl=impl, options=options)
    if "exif" in evaluator.traits:
        add("orientation", spec.replace(exif_orientation=not spec.exif_orientation),
            _exif_text(spec.exif_orientation), _exif_text(not spec.exif_orientation))
    if "alpha" in evaluator.traits:
        add("alpha", spec.replace(alpha="composite" if spec.alpha == "drop" else "drop"), spec.alpha,
            "composite" if spec.alpha == "drop" else "drop")
    if "16bit" in evaluator.traits:
        add("16-bit conversion", spec.replace(high_bit_depth="round" if spec.high_bit_depth == "shift" else "shift"),
            spec.high_bit_depth, "round" if spec.high_bit_depth == "shift" else "shift")
    if target_hw is not None:
        hw = _output_hw(spec, evaluator)
        if hw is not None and hw != target_hw:
            add("output size", spec.replace(size=target_hw, shorter_side=None, crop=None), _size_text(spec),
                f"resize to {target_hw[0]}x{target_hw[1]}")
            if _resizes(spec):
                add("output size", spec.replace(crop=target_hw), _size_text(spec), f"center crop {target_hw[0]}x{target_hw[1]}")
    if other is not None:
        changes.extend(_spec_diff_changes(state, other, done))
    return changes


def _spec_diff_changes(state: State, other: State, done: set) -> List[Change]:
    """One change per group of fields where the two specs differ (both sides spec-driven)."""
    a, b = state.spec, other.spec
    groups = {
        "channel order": ("color",),
        "layout": ("layout",),
        "normalization constants": ("scale", "mean", "std"),
        "resize method": ("resize", "antialias"),
        "output size": ("size", "shorter_side", "crop"),
        "orientation": ("exif_orientation",),
        "alpha": ("alpha", "background"),
        "16-bit conversion": ("high_bit_depth",),
        "dtype": ("dtype", "quant_scale", "quant_zero_point"),
    }
    out = []
    for family, fields in groups.items():
        if family in done or all(getattr(a, f) == getattr(b, f) for f in fields):
            continue
        new_spec = a.replace(**{f: getattr(b, f) for f in fields})
        out.append(Change(family, State(new_spec, state.impl, state.options), _group_text(a, fields), _group_text(b, fields)))
    if (state.impl, state.options) != (other.impl, other.options) and "library" not in done:
        out.append(Change("library", State(a, other.impl, other.options), state.library, other.library))
    return out


def _group_text(spec: PreprocessSpec, fields: Tuple[str, ...]) -> str:
    if fields == ("scale", "mean", "std"):
        return describe_values(spec)
    if fields == ("resize", "antialias"):
        return _resize_text(spec)
    if fields == ("size", "shorter_side", "crop"):
        return _size_text(spec)
    if fields == ("exif_orientation",):
        return _exif_text(spec.exif_orientation)
    return ", ".join(f"{f} {getattr(spec, f)}" for f in fields)


def _resize_text(spec: PreprocessSpec) -> str:
    if spec.resize == "nearest":
        return "nearest"
    return f"{spec.resize} with antialias" if spec.antialias else f"{spec.resize} without antialias"


def _exif_text(on: bool) -> str:
    return "EXIF orientation applied" if on else "EXIF orientation ignored"


def _size_text(spec: PreprocessSpec) -> str:
    parts = []
    if spec.size:
        parts.append(f"resize to {spec.size[0]}x{spec.size[1]}")
    if spec.shorter_side:
        parts.append(f"shorter side {spec.shorter_side}")
    if spec.crop:
        parts.append(f"center crop {spec.crop[0]}x{spec.crop[1]}")
    return ", ".join(parts) or "no resize"


def _output_hw(spec: PreprocessSpec, evaluator: Evaluator) -> Optional[Tuple[int, int]]:
    raw = evaluator.raw(State(spec, "pillow"))
    return tuple(raw[0].shape[:2]) if raw else None


def _target_hw(target: np.ndarray, spec: PreprocessSpec) -> Optional[Tuple[int, int]]:
    if target.ndim != 3:
        return None
    if spec.layout == "NCHW" and target.shape[0] == spec.channels:
        return tuple(target.shape[1:])
    if target.shape[-1] == spec.channels:
        return tuple(target.shape[:2])
    return tuple(target.shape[1:]) if target.shape[0] in (1, 3) else tuple(target.shape[:2])


def _choose_images(diffs: Sequence[ImageDiff], reference: Sequence[Result], candidate: Sequence[Result]) -> List[int]:
    usable = [i for i, d in enumerate(diffs) if d.status in ("compared", "shape_mismatch")]
    def badness(i: int) -> float:
        d = diffs[i]
        if d.status == "shape_mismatch":
            return math.inf
        return d.metrics.get("mean_abs_lsb", d.metrics.get("mean_abs", 0.0))
    usable.sort(key=lambda i: (-badness(i), i))
    return usable[:MAX_IMAGES]


def _state_of(pipeline: Preprocessor) -> Optional[State]:
    if not isinstance(pipeline, SpecPreprocessor):
        return None
    impl = "pillow" if pipeline.kind == "c" else pipeline.kind  # C equals the reference bit for bit
    if impl == "torchvision-real":
        impl = "torchvision"
    return State(pipeline.spec, impl, tuple(sorted(pipeline.options.items())))


def diagnose(
    reference: Preprocessor, candidate: Preprocessor, images: Sequence[Path],
    reference_results: Sequence[Result], candidate_results: Sequence[Result], diffs: Sequence[ImageDiff],
) -> dict:
    """Search for the perturbations that explain the difference; a JSON-ready result."""
    ref_state, cand_state = _state_of(reference), _state_of(candidate)
    if ref_state is None and cand_state is None:  # both user code or tensors: describe each side instead
        from edgekit.preprocessing.blackbox import diagnose_black_box

        return diagnose_black_box(images, reference_results, candidate_results, diffs)
    chosen = _choose_images(diffs, reference_results, candidate_results)
    if not chosen:
        return {"available": False, "reason": "no image was processed by both pipelines"}
    perturb_reference = ref_state is not None
    start = ref_state if perturb_reference else cand_state
    other = cand_state if perturb_reference else ref_state
    target = [squeeze_batch(candidate_results[i] if perturb_reference else reference_results[i]) for i in chosen]
    units = Units.for_spec((ref_state or cand_state).spec)
    evaluator = Evaluator([Path(images[i]) for i in chosen], target, units)
    target_hw = _target_hw(target[0], start.spec)

    state, error = start, evaluator.distance(start)
    initial = error
    steps: List[dict] = []
    done: set = set()
    for _ in range(MAX_ROUNDS):
        if error <= EXPLAINED_LSB * 0.1:
            break
        best: Optional[Tuple[float, Change, Optional[State]]] = None
        for change in candidate_changes(state, other, target_hw, evaluator, done):
            d = evaluator.distance(change.state)
            if best is None or d < best[0]:
                best = (d, change, None)
            if "normalization constants" in done and change.family != "normalization constants":
                # constants fitted earlier belong to the old state: refit them after this change
                refit = evaluator.fit_values(change.state)
                if refit is not None:
                    refit_state = State(refit, change.state.impl, change.state.options)
                    d2 = evaluator.distance(refit_state)
                    if d2 < best[0]:
                        best = (d2, change, refit_state)
        if best is None:
            break
        d, change, refit_state = best
        if not (d < error * MIN_GAIN and error - d > MIN_GAIN_LSB) and not (math.isinf(error) and math.isfinite(d)):
            break
        steps.append({"family": change.family, "from": change.old, "to": change.new,
                      "mean_abs_lsb_before": error, "mean_abs_lsb_after": d})
        done.add(change.family)
        state, error = change.state, d
        if refit_state is not None:
            steps.append({"family": "normalization constants", "from": describe_values(change.state.spec),
                          "to": describe_values(refit_state.spec), "mean_abs_lsb_before": d, "mean_abs_lsb_after": d,
                          "refit_with": change.family})
            state = refit_state
    causes = _causes(steps, perturb_reference)
    if _only_range_differs(start.spec, state.spec):
        for cause in causes:
            if cause["family"] == "normalization constants":
                cause["family"] = "value range"
                cause["description"] = "value range" + cause["description"][len("normalization constants"):]
    explained = math.isfinite(error) and error <= EXPLAINED_LSB
    return {
        "available": True,
        "perturbed": "reference" if perturb_reference else "candidate",
        "images": [Path(images[i]).name for i in chosen],
        "units": "input LSB" if units.step is not None else "tensor units",
        "initial_mean_abs": initial,
        "residual_mean_abs": error,
        "explained": explained,
        "causes": causes,
        "steps": steps,
        "evaluations": evaluator.evaluations,
        "summary": _summary(causes, explained, initial, error),
    }


def _causes(steps: List[dict], perturb_reference: bool) -> List[dict]:
    """One entry per family (a family can be applied twice, e.g. constants refitted after a channel
    swap): the original value, the final value and the difference it removed, phrased as
    reference vs candidate."""
    merged: Dict[str, dict] = {}
    for s in steps:
        gain = s["mean_abs_lsb_before"] - s["mean_abs_lsb_after"]
        entry = merged.setdefault(s["family"], {"from": s["from"], "to": s["to"], "removed": 0.0, "fixed_shape": False})
        entry["to"] = s["to"]
        if math.isinf(s["mean_abs_lsb_before"]):
            entry["fixed_shape"] = True
        else:
            entry["removed"] += gain
    causes = []
    for family, e in merged.items():
        if e["from"] == e["to"]:
            continue
        ref_value, cand_value = (e["from"], e["to"]) if perturb_reference else (e["to"], e["from"])
        extra = f" ({LIBRARY_TEXT[cand_value]})" if family == "library" and cand_value in LIBRARY_TEXT else ""
        causes.append({
            "family": family,
            "reference": ref_value,
            "candidate": cand_value,
            "description": f"{family}: the candidate uses {cand_value}{extra}, the reference {ref_value}",
            "removed": e["removed"],
            "fixed_shape": e["fixed_shape"],
        })
    return causes


def _summary(causes: List[dict], explained: bool, initial: float, residual: float) -> str:
    if not causes:
        return (f"no known mismatch explains the difference (mean {initial:.3g}); the candidate differs in a way "
                "edgekit does not try (custom code, augmentation, a different image?)")
    names = "; ".join(c["description"] for c in causes)
    if explained:
        return f"explained (mean difference {initial:.3g} -> {residual:.3g}) by: {names}"
    return f"partly explained (mean difference {initial:.3g} -> {residual:.3g}) by: {names}; the rest is unexplained"
