"""Decoding an image file with Pillow into 8-bit pixels, as the spec's ``decode`` section says.

Shared by the Pillow reference, the torchvision implementation (torchvision's default loader is
Pillow) and the host harness of the generated C code (C gets the decoded pixels).

Rules (the spec's definition of decoding; other libraries are measured against them):
- EXIF Orientation is applied first (``exif_orientation``), as ``ImageOps.exif_transpose``.
- Gray sources (1, L, I;16, I, LA) stay one channel; everything else becomes RGB
  (CMYK, YCbCr, palette... through Pillow's ``convert("RGB")``).
- 16-bit samples become 8-bit by ``v >> 8`` (``high_bit_depth: shift``, what libpng's strip_16,
  OpenCV and TF do; Pillow itself does it for 48-bit RGB PNGs) or ``round(v / 257)`` (``round``).
- Alpha (RGBA, LA, PA, transparent palette): ``drop`` ignores it; ``composite`` blends the RGB
  version of the image (gray replicated) onto ``background``: out = (c * a + bg * (255 - a) + 127) // 255,
  per R, G, B; a gray spec then takes the luma of that.
- Color: RGB -> gray is Pillow's luma (R*19595 + G*38470 + B*7471 + 0x8000) >> 16; gray -> RGB
  replicates the channel.
"""
from __future__ import annotations

from pathlib import Path
from typing import Tuple

import numpy as np

from edgekit.errors import UserError
from edgekit.preprocessing.resample import rgb_to_luma

GRAY_MODES = ("1", "L", "LA", "La", "I;16", "I;16B", "I;16L", "I;16N", "I")
ALPHA_MODES = ("RGBA", "RGBa", "LA", "La", "PA")

def orient_array(pixels: np.ndarray, orientation: int) -> np.ndarray:
    """Apply EXIF ``orientation`` (1..8) to an (H, W, ...) array exactly as ImageOps.exif_transpose."""
    if orientation == 2:
        return pixels[:, ::-1]
    if orientation == 3:
        return pixels[::-1, ::-1]
    if orientation == 4:
        return pixels[::-1]
    if orientation == 5:
        return np.swapaxes(pixels, 0, 1)
    if orientation == 6:
        return np.rot90(pixels, -1)
    if orientation == 7:
        return np.swapaxes(pixels[::-1, ::-1], 0, 1)
    if orientation == 8:
        return np.rot90(pixels, 1)
    return pixels


def exif_orientation(path: Path) -> int:
    """The EXIF Orientation tag of a file (1 when absent), read with Pillow without decoding pixels."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            value = img.getexif().get(0x0112, 1)
    except Exception:  # unreadable metadata: the decoder will report the file
        return 1
    return int(value) if isinstance(value, int) and 1 <= value <= 8 else 1


def composite(pixels: np.ndarray, alpha: np.ndarray, background: Tuple[int, ...]) -> np.ndarray:
    """Blend (H, W, 3) uint8 ``pixels`` (gray: replicated first) onto an opaque ``background`` color
    with (H, W) uint8 ``alpha``; channel order of ``background`` must match ``pixels``."""
    if pixels.shape[2] == 1:
        pixels = np.repeat(pixels, 3, axis=2)
    c = pixels.astype(np.int32)
    a = alpha.astype(np.int32)[..., None]
    bg = np.asarray(background, np.int32)
    return ((c * a + bg * (255 - a) + 127) // 255).astype(np.uint8)


def to_8bit(samples: np.ndarray, mode: str) -> np.ndarray:
    """16-bit samples to 8-bit: ``shift`` (v >> 8) or ``round`` (round(v / 257))."""
    samples = samples.astype(np.int64)
    if mode == "round":
        return np.floor(samples / 257.0 + 0.5).clip(0, 255).astype(np.uint8)
    return (samples >> 8).clip(0, 255).astype(np.uint8)


def decode_pillow(path: Path, spec) -> np.ndarray:
    """Decode ``path`` to (H, W, 1) gray or (H, W, 3) RGB uint8 per the spec's decode rules.

    Raises whatever Pillow raises for unreadable files; callers name the file.
    """
    from PIL import Image, ImageOps

    with Image.open(path) as img:
        img.load()
        if spec.exif_orientation:
            img = ImageOps.exif_transpose(img)
        mode = img.mode
        if mode in ("I;16", "I;16B", "I;16L", "I;16N", "I"):
            return to_8bit(np.asarray(img), spec.high_bit_depth)[:, :, None]
        if mode == "F":
            raise UserError("floating-point images (mode F) are not supported; convert them to 8 or 16 bit")
        has_alpha = mode in ALPHA_MODES or (mode == "P" and "transparency" in img.info)
        if has_alpha and spec.alpha == "composite":
            rgba = np.asarray(img.convert("RGBA"))
            return composite(rgba[:, :, :3], rgba[:, :, 3], spec.background)
        if mode in GRAY_MODES:
            return np.asarray(img.convert("L"))[:, :, None]
        return np.asarray(img.convert("RGB"))


def to_working_color(pixels: np.ndarray, spec) -> np.ndarray:
    """Decoded pixels to the spec's channel count: gray (luma) or RGB (replicated gray)."""
    if spec.channels == 1 and pixels.shape[2] == 3:
        return rgb_to_luma(pixels)[:, :, None]
    if spec.channels == 3 and pixels.shape[2] == 1:
        return np.repeat(pixels, 3, axis=2)
    return pixels
