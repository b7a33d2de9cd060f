"""Sizes and crop boxes a spec asks for, given the decoded image size (shared by every implementation)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from edgekit.errors import UserError


@dataclass(frozen=True)
class Geometry:
    """What happens to an image of ``input_hw``: an optional resize, then an optional crop."""

    input_hw: Tuple[int, int]
    resize_hw: Optional[Tuple[int, int]]  # None: no resize (same size)
    crop_box: Optional[Tuple[int, int, int, int]]  # (top, left, height, width) in the resized image

    @property
    def resized_hw(self) -> Tuple[int, int]:
        return self.resize_hw or self.input_hw

    @property
    def output_hw(self) -> Tuple[int, int]:
        return (self.crop_box[2], self.crop_box[3]) if self.crop_box else self.resized_hw


def shorter_side_size(image_hw: Tuple[int, int], shorter: int) -> Tuple[int, int]:
    """torchvision ``Resize(int)``: the shorter side becomes ``shorter``, the longer int(shorter * long / short)."""
    h, w = image_hw
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = shorter, int(shorter * long / short)
    new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
    return new_h, new_w


def center_crop_anchor(image_hw: Tuple[int, int], crop_hw: Tuple[int, int]) -> Tuple[int, int]:
    """(top, left) = round((H - h) / 2), Python round (half to even), as torchvision's center_crop."""
    return int(round((image_hw[0] - crop_hw[0]) / 2.0)), int(round((image_hw[1] - crop_hw[1]) / 2.0))


def plan_geometry(spec, image_hw: Tuple[int, int]) -> Geometry:
    """Resize target and crop box of ``spec`` for a decoded image of ``image_hw`` (height, width)."""
    image_hw = (int(image_hw[0]), int(image_hw[1]))
    if spec.size is not None:
        target = tuple(spec.size)
    elif spec.shorter_side is not None:
        target = shorter_side_size(image_hw, spec.shorter_side)
    else:
        target = image_hw
    resize_hw = None if target == image_hw else (int(target[0]), int(target[1]))
    resized = resize_hw or image_hw
    crop_box = None
    if spec.crop is not None:
        ch, cw = spec.crop
        if ch > resized[0] or cw > resized[1]:
            raise UserError(
                f"the image is {resized[0]}x{resized[1]} after resizing, smaller than the crop {ch}x{cw}",
                fix="resize first (size or shorter_side in the spec) or use a smaller crop",
            )
        if (ch, cw) != resized:
            top, left = center_crop_anchor(resized, (ch, cw))
            crop_box = (top, left, ch, cw)
    return Geometry(image_hw, resize_hw, crop_box)
