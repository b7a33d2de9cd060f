"""Image input and classifier output: what the app feeds (pixels) and gets (class labels).

An image model (calibration data = image folder + preprocessing spec, NCHW) gets a Core ML ImageType input whose
scale/bias do the spec's normalisation, so the app passes a CVPixelBuffer of the resized image. Parity then feeds
the quantized program pixels: ``PixelFeeds`` inverts the spec's value stage exactly (pixel = (value * std + mean) /
scale, rounded to the 8-bit integer it came from), in the model's channel order.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

import numpy as np

from edgekit.calibration.dataset import Sample
from edgekit.preprocessing.export_params import coreml_image_type
from edgekit.preprocessing.values import channel_constants

LABEL_NAME_FILES = ("labels.txt", "classes.txt")  # one class name per line, line i = class i


@dataclass(frozen=True)
class ImageInput:
    """ct.ImageType parameters taken from the preprocessing spec."""

    name: str
    scale: float
    bias: List[float]
    color_layout: str          # "RGB" | "BGR" | "G"
    spec: object               # PreprocessSpec

    def to_json(self) -> dict:
        return {"name": self.name, "scale": self.scale, "bias": self.bias, "color_layout": self.color_layout,
                "preprocess": self.spec.to_dict()}


def image_input(name: str, shape: Sequence[int], inputs) -> Optional[ImageInput]:
    """An ImageInput when the calibration data are images decoded by a spec into an NCHW tensor of this shape, else None.

    Raises the UserError of coreml_image_type when the spec cannot be expressed (e.g. per-channel std)."""
    spec = inputs.preprocess
    source = getattr(inputs.calib_set, "source", None)
    if spec is None or getattr(source, "kind", None) != "image-folder":
        return None
    if spec.layout != "NCHW" or len(shape) != 4 or shape[1] != spec.channels:
        return None
    params = coreml_image_type(spec)
    bias = [float(b) + 0.0 for b in params["bias"]]  # + 0.0: no "-0.0" in reports
    return ImageInput(name, params["scale"], bias, params["color_layout"], spec)


class PixelFeeds:
    """Sample (normalised float tensor) -> {input name: 0..255 pixels (1, C, H, W) float32 in the model's channel order}."""

    def __init__(self, image: ImageInput) -> None:
        self.name = image.name
        mean, std = channel_constants(image.spec)
        self.mean = mean.astype(np.float64).reshape(1, -1, 1, 1)
        self.std = std.astype(np.float64).reshape(1, -1, 1, 1)
        self.scale = float(np.float32(image.spec.scale))

    def pixels(self, values: np.ndarray) -> np.ndarray:
        px = (np.asarray(values, np.float64) * self.std + self.mean) / self.scale
        return np.clip(np.round(px), 0, 255).astype(np.float32)

    def __call__(self, sample: Sample) -> Dict[str, np.ndarray]:
        return {self.name: self.pixels(sample[0])}


def class_labels(inputs, output_shape: Sequence[int]) -> Optional[List[Union[int, str]]]:
    """Class labels for a (1, N) output when the data say what the classes are, else None.

    Names come from labels.txt / classes.txt beside the calibration data (one per line); otherwise, when the data
    carry integer labels (labels.csv, npz labels) that fit the N outputs, the class ids 0..N-1."""
    squeezed = [d for d in output_shape if d != 1]
    if len(squeezed) != 1 or squeezed[0] < 2:
        return None
    classes = squeezed[0]
    source = getattr(inputs.calib_set, "source", None)
    folder = Path(source.path) if source is not None else None
    for base in ([folder, folder.parent] if folder is not None else []):
        for name in LABEL_NAME_FILES:
            path = (base if base.is_dir() else base.parent) / name
            if path.is_file():
                names = [line.strip() for line in path.read_text().splitlines() if line.strip()]
                if len(names) == classes:
                    return names
    labels = inputs.calib_set.labels
    if labels and 0 <= min(labels) and max(labels) < classes:
        return list(range(classes))
    return None
