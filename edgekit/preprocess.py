"""PreprocessSpec: the single source of truth for turning an image file into a model input.

The Pillow implementation here is the reference; other implementations are tested against it.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Tuple

import numpy as np

from edgekit.errors import CalibrationDataError, UserError

COLORS = ("rgb", "bgr", "grayscale")
RESIZE_METHODS = ("nearest", "bilinear", "bicubic", "box", "hamming", "lanczos")
LAYOUTS = ("NCHW", "NHWC")
DTYPES = ("float32",)
SPEC_FILENAMES = ("preprocess.json",)


@dataclass(frozen=True)
class PreprocessSpec:
    """How an image becomes a tensor: color, resize, value scaling, layout and dtype.

    value = (pixel_0_255 * scale - mean[c]) / std[c]
    """

    name: str = "unnamed"
    color: str = "rgb"
    size: Tuple[int, int] | None = None  # (height, width); None keeps the decoded size
    resize: str = "bilinear"
    scale: float = 1.0 / 255.0
    mean: Tuple[float, ...] = (0.0,)
    std: Tuple[float, ...] = (1.0,)
    layout: str = "NHWC"
    dtype: str = "float32"
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def channels(self) -> int:
        return 1 if self.color == "grayscale" else 3

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "spec") -> "PreprocessSpec":
        """Validate a spec; every problem is collected and reported at once."""
        problems: list[str] = []
        known = {"name", "color", "size", "resize", "scale", "mean", "std", "layout", "dtype"}
        unknown = sorted(set(data) - known)
        if unknown:
            problems.append(f"unknown key(s) {unknown}; known keys: {sorted(known)}")
        color = data.get("color", "rgb")
        if color not in COLORS:
            problems.append(f"color {color!r} must be one of {list(COLORS)}")
        size = data.get("size")
        if size is not None and not (
            isinstance(size, (list, tuple)) and len(size) == 2 and all(isinstance(v, int) and v > 0 for v in size)
        ):
            problems.append(f"size {size!r} must be [height, width] with positive integers, or null")
        resize = data.get("resize", "bilinear")
        if resize not in RESIZE_METHODS:
            problems.append(f"resize {resize!r} must be one of {list(RESIZE_METHODS)}")
        layout = data.get("layout", "NHWC")
        if layout not in LAYOUTS:
            problems.append(f"layout {layout!r} must be one of {list(LAYOUTS)}")
        dtype = data.get("dtype", "float32")
        if dtype not in DTYPES:
            problems.append(f"dtype {dtype!r} must be one of {list(DTYPES)}")
        scale = data.get("scale", 1.0 / 255.0)
        if not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale == 0:
            problems.append(f"scale {scale!r} must be a finite non-zero number")
        channels = 1 if color == "grayscale" else 3
        mean = tuple(data.get("mean", (0.0,)))
        std = tuple(data.get("std", (1.0,)))
        for key, values in (("mean", mean), ("std", std)):
            if len(values) not in (1, channels) or not all(isinstance(v, (int, float)) for v in values):
                problems.append(f"{key} {list(values)} must hold 1 or {channels} numbers for color {color!r}")
        if any(isinstance(v, (int, float)) and v == 0 for v in std):
            problems.append("std must not contain 0")
        if problems:
            raise UserError(
                f"invalid preprocessing spec in {source}:\n" + "\n".join(f"  - {p}" for p in problems),
                fix="correct the spec; see calibration_data/digits/preprocess.json for an example",
            )
        return cls(
            name=str(data.get("name", "unnamed")),
            color=color,
            size=tuple(size) if size is not None else None,
            resize=resize,
            scale=float(scale),
            mean=tuple(float(v) for v in mean),
            std=tuple(float(v) for v in std),
            layout=layout,
            dtype=dtype,
        )

    @classmethod
    def load(cls, path: Path) -> "PreprocessSpec":
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(f"cannot read preprocessing spec {path}: {exc}") from None
        if not isinstance(data, dict):
            raise UserError(f"preprocessing spec {path} must be a JSON object")
        return cls.from_dict(data, source=str(path))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("extra")
        data["size"] = list(self.size) if self.size else None
        data["mean"], data["std"] = list(self.mean), list(self.std)
        return data

    def sample_shape(self, image_hw: Tuple[int, int] | None = None) -> Tuple[int, ...]:
        h, w = self.size or image_hw or (0, 0)
        return (self.channels, h, w) if self.layout == "NCHW" else (h, w, self.channels)


def find_spec(folder: Path) -> PreprocessSpec | None:
    """The spec stored beside a folder of images, if any."""
    for name in SPEC_FILENAMES:
        if (Path(folder) / name).is_file():
            return PreprocessSpec.load(Path(folder) / name)
    return None


def load_image(path: Path, spec: PreprocessSpec) -> np.ndarray:
    """Pillow reference: decode, orient, convert color, resize, scale, normalize, lay out."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            img.load()
            img = ImageOps.exif_transpose(img)
            mode = "L" if spec.color == "grayscale" else "RGB"
            if img.mode in ("I;16", "I;16B", "I;16L", "I"):
                img = Image.fromarray((np.asarray(img, dtype=np.float64) / 257.0).round().astype(np.uint8))
            img = img.convert(mode)
            if spec.size is not None and img.size != (spec.size[1], spec.size[0]):
                method = getattr(Image.Resampling, spec.resize.upper())
                img = img.resize((spec.size[1], spec.size[0]), method)
            pixels = np.asarray(img, dtype=np.float32)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise CalibrationDataError(f"cannot read image {path}: {exc}") from None
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    if spec.color == "bgr":
        pixels = pixels[:, :, ::-1]
    mean = np.asarray(spec.mean, dtype=np.float32)
    std = np.asarray(spec.std, dtype=np.float32)
    values = (pixels * np.float32(spec.scale) - mean) / std
    if spec.layout == "NCHW":
        values = values.transpose(2, 0, 1)
    return np.ascontiguousarray(values, dtype=np.float32)
