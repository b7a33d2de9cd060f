"""The reference implementation: Pillow decode, color and resize; numpy values.

Resizing uses ``PIL.Image.resize`` (antialiased, 8-bit) except for ``antialias: false``, which
Pillow's API cannot express: there the same algorithm runs with the kernel not widened
(``edgekit.preprocessing.resample``, bit-exact with Pillow where both apply).
"""
from __future__ import annotations

from pathlib import Path
from typing import List

import numpy as np

from edgekit.errors import CalibrationDataError
from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.preprocessing.base import IMPLEMENTATIONS, ImageReadError, SpecPreprocessor
from edgekit.preprocessing.decode import decode_pillow, to_working_color
from edgekit.preprocessing.geometry import plan_geometry
from edgekit.preprocessing.resample import resize_uint8
from edgekit.preprocessing.values import to_tensor


def resize_crop_pillow(pixels: np.ndarray, spec: PreprocessSpec) -> np.ndarray:
    """(H, W, C) uint8 -> resized and cropped (h, w, C) uint8, the reference way."""
    from PIL import Image

    geometry = plan_geometry(spec, pixels.shape[:2])
    if geometry.resize_hw is not None:
        h, w = geometry.resize_hw
        if spec.antialias or spec.resize == "nearest":
            image = Image.fromarray(pixels[:, :, 0] if pixels.shape[2] == 1 else pixels)
            resized = image.resize((w, h), getattr(Image.Resampling, spec.resize.upper()))
            pixels = np.asarray(resized).reshape(h, w, pixels.shape[2])
        else:
            pixels = resize_uint8(pixels, (h, w), spec.resize, antialias=False)
    if geometry.crop_box is not None:
        top, left, ch, cw = geometry.crop_box
        pixels = pixels[top : top + ch, left : left + cw]
    return pixels


def reference_pixels(path: Path, spec: PreprocessSpec) -> np.ndarray:
    """Decoded, color-converted, resized and cropped uint8 pixels (before the value stage)."""
    return resize_crop_pillow(to_working_color(decode_pillow(path, spec), spec), spec)


@IMPLEMENTATIONS.register("pillow")
class PillowPreprocessor(SpecPreprocessor):
    """Pillow (the reference)."""

    kind = "pillow"
    library = "Pillow"
    tools = ("pillow", "numpy")

    def _run(self, path: Path) -> np.ndarray:
        return to_tensor(reference_pixels(path, self.spec), self.spec)

    def notes(self) -> List[str]:
        if not self.spec.antialias and self.spec.resize != "nearest" and (self.spec.size or self.spec.shorter_side):
            return ["antialias: false is not in Pillow's API: Pillow's resampling algorithm runs with the kernel "
                    "not widened (edgekit.preprocessing.resample)"]
        return []


def reference_tensor(path: Path, spec: PreprocessSpec) -> np.ndarray:
    """The reference tensor for one file; CalibrationDataError naming the file when it fails."""
    try:
        return PillowPreprocessor(spec)(path)
    except ImageReadError as exc:
        raise CalibrationDataError(f"cannot read image {exc.path}: {exc.reason}") from exc
