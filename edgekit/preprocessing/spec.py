"""PreprocessSpec: the single source of truth for turning an image file into a model input.

The pipeline a spec defines, in this order::

    decode      read the file; EXIF orientation, alpha, 16-bit and CMYK handling (``decode``)
    color       to RGB or 8-bit gray (Pillow's ITU-R 601-2 luma), output channel order rgb/bgr
    resize      to ``size`` [h, w] or so the shorter side is ``shorter_side``; ``resize`` method,
                ``antialias`` (widen the kernel when downscaling, as Pillow does) - on 8-bit pixels
    crop        center crop to ``crop`` [h, w], top = round((H - h) / 2) (half to even, as torchvision)
    values      value = (pixel * scale - mean[c]) / std[c]     (or pixel * scale + offset[c])
    layout      NCHW or NHWC (no batch dimension)
    dtype       float32, or int8/uint8 quantized: q = clip(round_half_even(value / q_scale) + zero_point)

The Pillow implementation (``edgekit.preprocessing.pillow_impl``) is the reference; the other
implementations in ``edgekit.preprocessing`` are tested against it.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Mapping, Optional, Tuple, Union

import numpy as np
from typing_extensions import TypedDict

from edgekit.errors import UserError

COLORS = ("rgb", "bgr", "grayscale")
RESIZE_METHODS = ("nearest", "bilinear", "bicubic", "box", "hamming", "lanczos")
LAYOUTS = ("NCHW", "NHWC")
DTYPES = ("float32", "int8", "uint8")
ALPHA_MODES = ("drop", "composite")
HIGH_BIT_DEPTH_MODES = ("shift", "round")
SPEC_FILENAMES = ("preprocess.json", "preprocess.yaml", "preprocess.yml")

LEGACY_KEYS = ("name", "color", "size", "resize", "scale", "mean", "std", "layout", "dtype")
NEW_KEYS = ("decode", "antialias", "shorter_side", "crop", "offset", "quantization")
DECODE_KEYS = ("exif_orientation", "alpha", "background", "high_bit_depth")
EXAMPLE = "calibration_data/photos/preprocess.json"


class DecodeDict(TypedDict, total=False):
    """The ``decode`` key of a written spec (only the settings that are not the default)."""

    exif_orientation: bool
    alpha: str
    background: List[int]
    high_bit_depth: str


class QuantizationDict(TypedDict):
    scale: float
    zero_point: Optional[int]


class SpecDict(TypedDict, total=False):
    """A spec as ``PreprocessSpec.to_dict`` writes it (preprocess.json, and inside reports)."""

    name: str
    color: str
    size: Optional[List[int]]
    resize: str
    scale: float
    mean: List[float]
    std: List[float]
    layout: str
    dtype: str
    antialias: bool
    shorter_side: int
    crop: List[int]
    decode: DecodeDict
    quantization: Union[str, QuantizationDict]  # "model": read from the model input


class DecodeFields(TypedDict, total=False):
    """The validated ``decode`` settings as PreprocessSpec fields."""

    exif_orientation: bool
    alpha: str
    background: Tuple[int, int, int]
    high_bit_depth: str


class QuantizationFields(TypedDict, total=False):
    """The validated ``quantization`` setting as PreprocessSpec fields."""

    quant_from_model: bool
    quant_scale: float
    quant_zero_point: int


@dataclass(frozen=True)
class PreprocessSpec:
    """How an image becomes a tensor (see the module docstring for the exact pipeline).

    value = (pixel_0_255 * scale - mean[c]) / std[c]
    """

    name: str = "unnamed"
    color: str = "rgb"
    size: Tuple[int, int] | None = None  # (height, width) resize target; None: no fixed size
    resize: str = "bilinear"
    scale: float = 1.0 / 255.0
    mean: Tuple[float, ...] = (0.0,)
    std: Tuple[float, ...] = (1.0,)
    layout: str = "NHWC"
    dtype: str = "float32"
    # --- added with edgekit.preprocessing (defaults keep the original behaviour) ---
    antialias: bool = True  # widen the resampling kernel when downscaling (Pillow's Image.resize)
    shorter_side: Optional[int] = None  # resize so the shorter side has this length (aspect kept)
    crop: Tuple[int, int] | None = None  # center crop (height, width) after resizing
    exif_orientation: bool = True  # apply the EXIF Orientation tag before anything else
    alpha: str = "drop"  # RGBA/LA/transparent palette: drop alpha, or composite onto background
    background: Tuple[int, int, int] = (255, 255, 255)
    high_bit_depth: str = "shift"  # 16-bit samples to 8 bits: v >> 8 (libpng/OpenCV/TF) or round(v / 257)
    quant_scale: Optional[float] = None  # int8/uint8 output: q = round(value / quant_scale) + zero_point
    quant_zero_point: Optional[int] = None
    quant_from_model: bool = False  # take quant_scale/zero_point from the model's input tensor

    @property
    def channels(self) -> int:
        return 1 if self.color == "grayscale" else 3

    @property
    def quantized(self) -> bool:
        return self.dtype in ("int8", "uint8")

    # --------------------------------------------------------------- reading
    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "spec") -> "PreprocessSpec":  # a parsed user JSON/YAML
        """Validate a spec; every problem is collected and reported at once."""
        if not isinstance(data, Mapping):
            raise UserError(f"preprocessing spec {source} must be a mapping of keys to values, got {type(data).__name__}")
        problems: list[str] = []
        known = set(LEGACY_KEYS) | set(NEW_KEYS)
        unknown = sorted(set(data) - known)
        if unknown:
            problems.append(f"unknown key(s) {unknown}; known keys: {sorted(known)}")
        color = data.get("color", "rgb")
        if color not in COLORS:
            problems.append(f"color {color!r} must be one of {list(COLORS)}")
        size = data.get("size")
        if size is not None and not _is_hw(size):
            problems.append(f"size {size!r} must be [height, width] with positive integers, or null")
        shorter = data.get("shorter_side")
        if shorter is not None and not (isinstance(shorter, int) and not isinstance(shorter, bool) and shorter > 0):
            problems.append(f"shorter_side {shorter!r} must be a positive integer or null")
        if size is not None and shorter is not None:
            problems.append("give either size or shorter_side, not both")
        resize = data.get("resize", "bilinear")
        if resize not in RESIZE_METHODS:
            problems.append(f"resize {resize!r} must be one of {list(RESIZE_METHODS)}")
        antialias = data.get("antialias", True)
        if not isinstance(antialias, bool):
            problems.append(f"antialias {antialias!r} must be true or false")
        crop = data.get("crop")
        if crop is not None and not _is_hw(crop):
            problems.append(f"crop {crop!r} must be [height, width] with positive integers, or null")
        elif crop is not None:
            if _is_hw(size) and (crop[0] > size[0] or crop[1] > size[1]):
                problems.append(f"crop {list(crop)} is larger than the resized size {list(size)}")
            if isinstance(shorter, int) and min(crop) > shorter:
                problems.append(f"crop {list(crop)} is larger than shorter_side {shorter}")
        layout = data.get("layout", "NHWC")
        if layout not in LAYOUTS:
            problems.append(f"layout {layout!r} must be one of {list(LAYOUTS)}")
        dtype = data.get("dtype", "float32")
        if dtype not in DTYPES:
            problems.append(f"dtype {dtype!r} must be one of {list(DTYPES)}")
        scale = data.get("scale", 1.0 / 255.0)
        if not _is_number(scale) or not math.isfinite(scale) or scale == 0:
            problems.append(f"scale {scale!r} must be a finite non-zero number")
        channels = 1 if color == "grayscale" else 3
        mean, std = _values(data, channels, problems)
        decode = _decode(data.get("decode", {}), problems)
        quant = _quantization(data.get("quantization"), dtype, problems)
        if problems:
            raise UserError(
                f"invalid preprocessing spec in {source}:\n" + "\n".join(f"  - {p}" for p in problems),
                fix=f"correct the spec; see {EXAMPLE} or calibration_data/digits/preprocess.json for an example",
            )
        return cls(
            name=str(data.get("name", "unnamed")),
            color=color,
            size=tuple(size) if size is not None else None,
            resize=resize,
            scale=float(scale),
            mean=mean,
            std=std,
            layout=layout,
            dtype=dtype,
            antialias=antialias,
            shorter_side=shorter,
            crop=tuple(crop) if crop is not None else None,
            **decode,
            **quant,
        )

    @classmethod
    def load(cls, path: Path) -> "PreprocessSpec":
        """Read a spec from a .json, .yaml or .yml file."""
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise UserError(f"cannot read preprocessing spec {path}: {exc.strerror or exc}") from exc
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise UserError(f"preprocessing spec {path} is not valid YAML: {exc}") from exc
        else:
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise UserError(f"preprocessing spec {path} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise UserError(f"preprocessing spec {path} must be a JSON/YAML object (a mapping of keys to values)")
        return cls.from_dict(data, source=str(path))

    # --------------------------------------------------------------- writing
    def to_dict(self) -> "SpecDict":
        """The spec as JSON-ready data; keys added after the first version only when not default
        (so fingerprints of existing calibration sets do not change)."""
        data: SpecDict = {
            "name": self.name,
            "color": self.color,
            "size": list(self.size) if self.size else None,
            "resize": self.resize,
            "scale": self.scale,
            "mean": list(self.mean),
            "std": list(self.std),
            "layout": self.layout,
            "dtype": self.dtype,
        }
        if not self.antialias:
            data["antialias"] = False
        if self.shorter_side is not None:
            data["shorter_side"] = self.shorter_side
        if self.crop is not None:
            data["crop"] = list(self.crop)
        decode: DecodeDict = {}
        if not self.exif_orientation:
            decode["exif_orientation"] = False
        if self.alpha != "drop":
            decode["alpha"] = self.alpha
        if self.background != (255, 255, 255):
            decode["background"] = list(self.background)
        if self.high_bit_depth != "shift":
            decode["high_bit_depth"] = self.high_bit_depth
        if decode:
            data["decode"] = decode
        if self.quant_from_model:
            data["quantization"] = "model"
        elif self.quant_scale is not None:
            data["quantization"] = {"scale": self.quant_scale, "zero_point": self.quant_zero_point}
        return data

    def replace(self, **changes: Any) -> "PreprocessSpec":
        """A copy with some fields changed (specs are immutable)."""
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        """One line for reports."""
        if self.size:
            geometry = f"resize {self.size[0]}x{self.size[1]}"
        elif self.shorter_side:
            geometry = f"resize shorter side {self.shorter_side}"
        else:
            geometry = "no resize"
        if self.size or self.shorter_side:
            geometry += f" {self.resize}{'' if self.antialias or self.resize == 'nearest' else ' (no antialias)'}"
        if self.crop:
            geometry += f", center crop {self.crop[0]}x{self.crop[1]}"
        values = f"x*{self.scale:.6g}, mean {_short(self.mean)}, std {_short(self.std)}"
        out = f"{self.dtype}"
        if self.quantized:
            out += " (q from model)" if self.quant_from_model else f" (q scale {self.quant_scale:.6g}, zp {self.quant_zero_point})"
        return f"{self.color}, {geometry}, {values}, {self.layout}, {out}"

    # --------------------------------------------------------------- shapes and units
    def output_hw(self, image_hw: Tuple[int, int]) -> Tuple[int, int]:
        """(height, width) of the tensor for a decoded image of ``image_hw``."""
        from edgekit.preprocessing.geometry import plan_geometry

        return plan_geometry(self, image_hw).output_hw

    def sample_shape(self, image_hw: Tuple[int, int] | None = None) -> Tuple[int, ...]:
        if self.crop:
            h, w = self.crop
        elif self.size:
            h, w = self.size
        elif image_hw is not None:
            h, w = self.output_hw(image_hw)
        else:
            h, w = 0, 0
        return (self.channels, h, w) if self.layout == "NCHW" else (h, w, self.channels)

    def value_step(self) -> np.ndarray:
        """Tensor units per 0..255 pixel step, per output channel (|scale / std|)."""
        std = np.broadcast_to(np.asarray(self.std, np.float64), (self.channels,))
        return np.abs(self.scale / std)

    def with_quantization(self, scale: float, zero_point: int) -> "PreprocessSpec":
        """The spec with concrete input quantization (e.g. read from the model)."""
        return self.replace(quant_scale=float(scale), quant_zero_point=int(zero_point), quant_from_model=False)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_hw(value: Any) -> bool:
    return (
        isinstance(value, (list, tuple)) and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    )


def _short(values: Tuple[float, ...]) -> str:
    return "[" + ", ".join(f"{v:.4g}" for v in values) + "]"


def _values(data: Mapping[str, Any], channels: int, problems: list[str]) -> Tuple[Tuple[float, ...], Tuple[float, ...]]:  # user spec
    """mean/std, or offset (value = pixel * scale + offset) turned into mean = -offset, std = 1."""
    if "offset" in data and ("mean" in data or "std" in data):
        problems.append("give either offset or mean/std, not both")
        return (0.0,), (1.0,)
    if "offset" in data:
        offset = data["offset"]
        offsets = offset if isinstance(offset, (list, tuple)) else [offset]
        if len(offsets) not in (1, channels) or not all(_is_number(v) and math.isfinite(v) for v in offsets):
            problems.append(f"offset {offset!r} must be a number or a list of {_counts(channels)}")
            return (0.0,), (1.0,)
        return tuple(-float(v) for v in offsets), (1.0,)
    result = []
    for key, default in (("mean", (0.0,)), ("std", (1.0,))):
        values = data.get(key, default)
        if not isinstance(values, (list, tuple)) or len(values) not in (1, channels) or not all(
            _is_number(v) and math.isfinite(v) for v in values
        ):
            problems.append(f"{key} {values!r} must be a list of {_counts(channels)} "
                            f"(color {'grayscale has 1 channel' if channels == 1 else 'rgb/bgr has 3 channels'})")
            values = default
        result.append(tuple(float(v) for v in values))
    if any(v <= 0 for v in result[1]):
        problems.append(f"std {list(result[1])} must hold positive numbers (std > 0; a negative std flips the "
                        "sign of the input, 0 divides by zero)")
    return result[0], result[1]


def _counts(channels: int) -> str:
    """How many per-channel values a spec key may hold: '1 finite number' or '1 or 3 finite numbers'."""
    return "1 finite number" if channels == 1 else f"1 or {channels} finite numbers"


def _decode(decode: Any, problems: list[str]) -> "DecodeFields":
    out: DecodeFields = {}
    if not isinstance(decode, Mapping):
        problems.append(f"decode {decode!r} must be a mapping with keys {list(DECODE_KEYS)}")
        return out
    unknown = sorted(set(decode) - set(DECODE_KEYS))
    if unknown:
        problems.append(f"unknown decode key(s) {unknown}; known: {list(DECODE_KEYS)}")
    exif = decode.get("exif_orientation", True)
    if not isinstance(exif, bool):
        problems.append(f"decode.exif_orientation {exif!r} must be true or false")
    else:
        out["exif_orientation"] = exif
    alpha = decode.get("alpha", "drop")
    if alpha not in ALPHA_MODES:
        problems.append(f"decode.alpha {alpha!r} must be one of {list(ALPHA_MODES)}")
    else:
        out["alpha"] = alpha
    background = decode.get("background", [255, 255, 255])
    if not (
        isinstance(background, (list, tuple)) and len(background) == 3
        and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 255 for v in background)
    ):
        problems.append(f"decode.background {background!r} must be [r, g, b] with integers 0..255")
    else:
        out["background"] = tuple(background)
    depth = decode.get("high_bit_depth", "shift")
    if depth not in HIGH_BIT_DEPTH_MODES:
        problems.append(f"decode.high_bit_depth {depth!r} must be one of {list(HIGH_BIT_DEPTH_MODES)}")
    else:
        out["high_bit_depth"] = depth
    return out


def _quantization(quant: Any, dtype: str, problems: list[str]) -> "QuantizationFields":
    quantized = dtype in ("int8", "uint8")
    if quant is None:
        if quantized:
            problems.append(
                f"dtype {dtype} needs quantization: {{\"scale\": S, \"zero_point\": Z}} or \"model\" (read from the model input)"
            )
        return {}
    if not quantized:
        problems.append(f"quantization is given but dtype is {dtype!r}; use dtype int8 or uint8, or drop quantization")
        return {}
    if quant == "model":
        return {"quant_from_model": True}
    if not isinstance(quant, Mapping) or set(quant) != {"scale", "zero_point"}:
        problems.append(f"quantization {quant!r} must be {{\"scale\": S, \"zero_point\": Z}} or \"model\"")
        return {}
    scale, zp = quant["scale"], quant["zero_point"]
    limits = (-128, 127) if dtype == "int8" else (0, 255)
    if not _is_number(scale) or not math.isfinite(scale) or scale <= 0:
        problems.append(f"quantization.scale {scale!r} must be a positive number")
    if not (isinstance(zp, int) and not isinstance(zp, bool) and limits[0] <= zp <= limits[1]):
        problems.append(f"quantization.zero_point {zp!r} must be an integer in {list(limits)} for {dtype}")
    return {"quant_scale": float(scale), "quant_zero_point": zp} if _is_number(scale) and isinstance(zp, int) else {}


def find_spec(folder: Path) -> PreprocessSpec | None:
    """The spec stored beside a folder of images, if any."""
    for name in SPEC_FILENAMES:
        if (Path(folder) / name).is_file():
            return PreprocessSpec.load(Path(folder) / name)
    return None


def load_image(path: Path, spec: PreprocessSpec) -> np.ndarray:
    """Pillow reference: decode, orient, convert color, resize, crop, scale, normalize, lay out.

    Raises CalibrationDataError naming the file when it cannot be decoded.
    """
    from edgekit.preprocessing.pillow_impl import reference_tensor

    return reference_tensor(Path(path), spec)
