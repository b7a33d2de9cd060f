"""The spec's value stage in numpy (the reference): channel order, scaling, layout, quantization."""
from __future__ import annotations

import numpy as np

from edgekit.errors import UserError


def channel_constants(spec) -> tuple[np.ndarray, np.ndarray]:
    """float32 mean and std, one per output channel."""
    mean = np.broadcast_to(np.asarray(spec.mean, np.float32), (spec.channels,)).copy()
    std = np.broadcast_to(np.asarray(spec.std, np.float32), (spec.channels,)).copy()
    return mean, std


def scale_values(pixels: np.ndarray, spec) -> np.ndarray:
    """(H, W, C) pixels in working RGB/gray order -> float32 values in the output channel order, HWC.

    value = (pixel * scale - mean[c]) / std[c], every operation in float32.
    """
    px = np.asarray(pixels, np.float32)
    if spec.color == "bgr":
        px = px[:, :, ::-1]
    mean, std = channel_constants(spec)
    return (px * np.float32(spec.scale) - mean) / std


def quantize(values: np.ndarray, spec) -> np.ndarray:
    """float values -> int8/uint8: clip(round_half_even(value / scale) + zero_point), in float64
    (the same arithmetic edgekit uses to feed a quantized model, tflite_model.quantize_input)."""
    if spec.quant_scale is None:
        raise UserError(
            f"spec {spec.name!r} asks for the model's input quantization but no model was given",
            fix="pass --model, or write quantization: {scale: S, zero_point: Z} into the spec",
        )
    info = np.iinfo(np.int8 if spec.dtype == "int8" else np.uint8)
    q = np.round(np.asarray(values, np.float64) / spec.quant_scale) + spec.quant_zero_point
    return np.clip(q, info.min, info.max).astype(info.dtype)


def lay_out(values_hwc: np.ndarray, spec) -> np.ndarray:
    if spec.layout == "NCHW":
        values_hwc = values_hwc.transpose(2, 0, 1)
    return np.ascontiguousarray(values_hwc)


def to_tensor(pixels: np.ndarray, spec) -> np.ndarray:
    """Pixels (H, W, C) after resize/crop -> the model-input tensor (no batch dimension)."""
    values = scale_values(pixels, spec)
    if spec.quantized:
        values = quantize(values, spec)
    return lay_out(values, spec)


def lookup_tables(spec) -> np.ndarray:
    """(C, 256) output value per output channel and 8-bit pixel, computed with the same numpy
    arithmetic as :func:`to_tensor` (the generated C code uses these tables)."""
    ramp = np.repeat(np.arange(256, dtype=np.uint8)[None, :, None], spec.channels, axis=2)  # (1, 256, C)
    values = scale_values(ramp, spec)  # every channel holds the same ramp, so the bgr swap is a no-op
    if spec.quantized:
        values = quantize(values, spec)
    return np.ascontiguousarray(values[0].T)
