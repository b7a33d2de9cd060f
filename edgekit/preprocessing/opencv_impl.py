"""OpenCV implementation (opencv-contrib-python, the one cv2 mediapipe also needs): what an OpenCV app following the spec computes.

- Decode: ``cv2.imdecode`` with IMREAD_COLOR | IMREAD_ANYDEPTH (EXIF orientation applied by
  OpenCV; IMREAD_IGNORE_ORIENTATION added when the spec turns it off). With ``alpha: composite``
  IMREAD_UNCHANGED keeps the alpha channel; OpenCV then applies no EXIF orientation to images that
  have alpha (documented).
- Color: BGR as decoded; ``cv2.cvtColor`` to RGB or to gray (OpenCV's 14-bit fixed-point luma:
  may differ from Pillow's 16-bit luma by 1).
- Resize (``cv2.resize``): nearest -> INTER_NEAREST_EXACT (Pillow's half-pixel nearest;
  ``nearest=legacy`` gives INTER_NEAREST, floor(x * scale), the classic mismatch); bilinear ->
  INTER_LINEAR; bicubic -> INTER_CUBIC (a = -0.75, Pillow -0.5); lanczos -> INTER_LANCZOS4;
  box -> INTER_AREA. OpenCV has no antialiased bilinear/bicubic: with ``antialias: true`` and a
  shrinking image, INTER_AREA (box average) stands in - it differs from Pillow by design.
  hamming does not exist in OpenCV.
- Values: numpy float32, as an OpenCV app would write them.
"""
from __future__ import annotations

from pathlib import Path
from typing import List

import numpy as np

from edgekit.errors import ToolMissingError, UserError
from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.preprocessing.base import IMPLEMENTATIONS, SpecPreprocessor
from edgekit.preprocessing.decode import composite, to_8bit
from edgekit.preprocessing.geometry import plan_geometry
from edgekit.preprocessing.values import to_tensor


def _cv2():
    try:
        import cv2
    except ImportError:
        raise ToolMissingError("opencv-contrib-python", "pip install opencv-contrib-python==5.1.0.95 (or run `make install`)") from None
    return cv2


def interpolation_for(spec: PreprocessSpec, src_hw, dst_hw, nearest: str = "exact") -> int:
    cv2 = _cv2()
    shrinking = dst_hw[0] <= src_hw[0] and dst_hw[1] <= src_hw[1]
    if spec.resize == "nearest":
        return cv2.INTER_NEAREST_EXACT if nearest == "exact" else cv2.INTER_NEAREST
    if spec.resize == "box":
        return cv2.INTER_AREA
    if spec.antialias and shrinking:
        return cv2.INTER_AREA
    return {"bilinear": cv2.INTER_LINEAR, "bicubic": cv2.INTER_CUBIC, "lanczos": cv2.INTER_LANCZOS4}[spec.resize]


@IMPLEMENTATIONS.register("opencv")
class OpenCVPreprocessor(SpecPreprocessor):
    """cv2.imdecode + cv2.cvtColor + cv2.resize + numpy."""

    kind = "opencv"
    library = "OpenCV"
    tools = ("opencv-contrib-python", "numpy")

    def __init__(self, spec: PreprocessSpec, *, nearest: str = "exact") -> None:
        if nearest not in ("exact", "legacy"):
            raise UserError(f"opencv nearest={nearest!r} must be 'exact' or 'legacy'")
        super().__init__(spec, **({"nearest": nearest} if nearest != "exact" else {}))
        self.nearest = nearest
        self.read_errors = self.read_errors + (_cv2().error,)

    def check_supported(self, spec: PreprocessSpec) -> None:
        if spec.resize == "hamming" and (spec.size or spec.shorter_side):
            raise UserError("OpenCV has no hamming resampling filter", fix="use the pillow implementation, or another method")

    def with_spec(self, spec: PreprocessSpec) -> "OpenCVPreprocessor":
        return OpenCVPreprocessor(spec, nearest=self.nearest)

    def decode(self, path: Path) -> np.ndarray:
        """(H, W, 3) BGR or (H, W, 1)... uint8 per the spec's decode rules, the OpenCV way."""
        cv2 = _cv2()
        data = np.fromfile(str(path), dtype=np.uint8)
        flags = cv2.IMREAD_COLOR | cv2.IMREAD_ANYDEPTH
        if not self.spec.exif_orientation:
            flags |= cv2.IMREAD_IGNORE_ORIENTATION
        image = None
        if self.spec.alpha == "composite" and data.size:
            image = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)  # keeps alpha, applies no EXIF orientation
            if image is not None and (image.ndim == 2 or image.shape[2] not in (2, 4)):
                image = None  # no alpha channel: decode normally (with orientation)
        if image is None:
            image = cv2.imdecode(data, flags) if data.size else None
        if image is None:
            raise ValueError("OpenCV cannot decode this file (cv2.imdecode returned None)")
        if image.ndim == 2:
            image = image[:, :, None]
        if image.dtype == np.uint16:
            image = to_8bit(image, self.spec.high_bit_depth)
        elif image.dtype != np.uint8:
            raise UserError(f"unsupported sample type {image.dtype}")
        if image.shape[2] == 4:  # BGRA (alpha composite mode only)
            bgr = composite(image[:, :, :3], image[:, :, 3], tuple(reversed(self.spec.background)))
            return bgr
        if image.shape[2] == 2:  # gray + alpha
            return composite(image[:, :, :1], image[:, :, 1], tuple(reversed(self.spec.background)))
        if image.shape[2] == 1:
            return np.repeat(image, 3, axis=2)
        return image

    def _run(self, path: Path) -> np.ndarray:
        cv2 = _cv2()
        bgr = self.decode(path)
        if self.spec.channels == 1:
            pixels = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)[:, :, None]
        else:
            pixels = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        geometry = plan_geometry(self.spec, pixels.shape[:2])
        if geometry.resize_hw is not None:
            h, w = geometry.resize_hw
            flag = interpolation_for(self.spec, pixels.shape[:2], (h, w), self.nearest)
            pixels = cv2.resize(pixels, (w, h), interpolation=flag).reshape(h, w, pixels.shape[2])
        if geometry.crop_box is not None:
            top, left, ch, cw = geometry.crop_box
            pixels = pixels[top : top + ch, left : left + cw]
        return to_tensor(pixels, self.spec)

    def notes(self) -> List[str]:
        notes = []
        resizes = bool(self.spec.size or self.spec.shorter_side)
        if self.spec.channels == 1:
            notes.append("gray: cv2.cvtColor uses 14-bit fixed-point luma weights (Pillow 16-bit): may differ by 1")
        if resizes and self.spec.resize in ("bilinear", "bicubic", "lanczos") and self.spec.antialias:
            notes.append("antialias: OpenCV has no antialiased bilinear/bicubic/lanczos; shrinking uses INTER_AREA "
                         "(box average) instead of Pillow's widened kernel - differs by design")
        if resizes and self.spec.resize == "bilinear":
            notes.append("INTER_LINEAR uses 11-bit fixed-point weights: within 1 of the exact value")
        if resizes and self.spec.resize == "bicubic":
            notes.append("INTER_CUBIC uses a = -0.75 and replicates borders (Pillow a = -0.5, renormalized borders)")
        if resizes and self.spec.resize == "lanczos":
            notes.append("INTER_LANCZOS4 is an 8x8 Lanczos-4 kernel (Pillow: Lanczos-3, widened when shrinking)")
        if resizes and self.spec.resize == "nearest" and self.nearest == "legacy":
            notes.append("INTER_NEAREST picks floor(x * scale), not the pixel whose center is nearest")
        if self.spec.alpha == "composite":
            notes.append("alpha composite: images with alpha are decoded with IMREAD_UNCHANGED, which applies no EXIF orientation")
        return notes
