"""The spec's value stage in the terms other formats use: Core ML ImageType and TFLite metadata.

- Core ML ``ct.ImageType(scale=s, bias=[b_r, b_g, b_b], color_layout=RGB|BGR|G)`` computes
  ``s * pixel + b[c]`` with ONE scale for all channels: a spec with per-channel std that differ
  cannot be expressed (UserError; fold the std into the model's first layer instead).
- TFLite metadata ``NormalizationOptions(mean=[...], std=[...])`` computes ``(pixel - mean) / std`` on
  0..255 pixels: mean_px = mean / scale, std_px = std / scale.
Resize, crop and decoding are not expressed by either: the app must do them as the spec says.
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np

from edgekit.errors import UserError
from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.preprocessing.values import channel_constants


def coreml_image_type(spec: PreprocessSpec) -> Dict[str, object]:
    """Keyword arguments for ``coremltools.ImageType`` (scale, bias, color_layout)."""
    mean, std = channel_constants(spec)
    slopes = np.float64(spec.scale) / std.astype(np.float64)
    if not np.allclose(slopes, slopes[0], rtol=1e-6):
        raise UserError(
            f"Core ML ImageType has one scale for all channels, but spec {spec.name!r} divides by std {list(std)}",
            fix="use a single std, or fold the per-channel std into the model's first layer",
        )
    if spec.quantized:
        raise UserError("Core ML ImageType feeds float values; use a float32 spec for Core ML")
    bias = (-mean.astype(np.float64) / std.astype(np.float64)).tolist()
    layout = {"rgb": "RGB", "bgr": "BGR", "grayscale": "G"}[spec.color]
    return {"scale": float(slopes[0]), "bias": bias if spec.channels == 3 else bias[:1], "color_layout": layout}


def tflite_normalization(spec: PreprocessSpec) -> Dict[str, List[float]]:
    """mean/std on 0..255 pixels for TFLite metadata NormalizationOptions (per output channel)."""
    mean, std = channel_constants(spec)
    return {"mean": (mean.astype(np.float64) / spec.scale).tolist(), "std": (std.astype(np.float64) / spec.scale).tolist()}
