"""TensorFlow implementation (tf.io + tf.image): what a TF input pipeline following the spec computes.

- Decode: ``tf.io.decode_jpeg(channels=3, dct_method="INTEGER_ACCURATE")`` for JPEG (TF's default
  INTEGER_FAST IDCT differs from libjpeg's ISLOW that Pillow/OpenCV use by up to ~20 levels; the
  option ``jpeg_idct=fast`` reproduces the default), ``tf.io.decode_png(dtype=uint16)`` for PNG
  (8-bit PNGs come back as v * 257, so one 16->8 rule serves both), ``tf.io.decode_image`` else.
  TF reads no EXIF: the Orientation tag is read with Pillow (metadata only) and applied with
  tf.image.rot90/flip/transpose.
- Color: ``tf.image.rgb_to_grayscale`` (float weights 0.2989/0.5870/0.1140, converted back with
  convert_image_dtype: truncation) and ``tf.image.grayscale_to_rgb``.
- Resize: ``tf.image.resize(method, antialias)``; bilinear, bicubic (Keys a = -0.5), lanczos3,
  area for box, nearest. The result stays float (clipped to 0..255, not rounded, as TF returns it):
  within 0.5 of Pillow's rounded 8-bit result where the kernels agree; Pillow also rounds and clips
  between its horizontal and vertical passes, TF does not (larger differences for bicubic/lanczos).
- Crop ``tf.image.crop_to_bounding_box``; values, layout and quantization in tf ops.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import List

import numpy as np

from edgekit.deps import tensorflow
from edgekit.errors import UserError
from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.preprocessing.base import IMPLEMENTATIONS, SpecPreprocessor
from edgekit.preprocessing.decode import exif_orientation
from edgekit.preprocessing.geometry import plan_geometry
from edgekit.preprocessing.values import channel_constants
from edgekit.quiet import captured_output

TF_METHODS = {"nearest": "nearest", "bilinear": "bilinear", "bicubic": "bicubic", "lanczos": "lanczos3", "box": "area"}


def _orient(tf, image, orientation: int):
    if orientation == 2:
        return tf.image.flip_left_right(image)
    if orientation == 3:
        return tf.image.rot90(image, 2)
    if orientation == 4:
        return tf.image.flip_up_down(image)
    if orientation == 5:
        return tf.image.transpose(image)
    if orientation == 6:
        return tf.image.rot90(image, 3)
    if orientation == 7:
        return tf.image.transpose(tf.image.rot90(image, 2))
    if orientation == 8:
        return tf.image.rot90(image, 1)
    return image


@IMPLEMENTATIONS.register("tf")
class TFPreprocessor(SpecPreprocessor):
    """tf.io decode + tf.image color/resize/crop + tf math."""

    kind = "tf"
    library = "TensorFlow tf.image"
    tools = ("tensorflow-cpu", "pillow")

    def __init__(self, spec: PreprocessSpec, *, jpeg_idct: str = "accurate") -> None:
        if jpeg_idct not in ("accurate", "fast"):
            raise UserError(f"tf jpeg_idct={jpeg_idct!r} must be 'accurate' or 'fast'")
        super().__init__(spec, **({"jpeg_idct": jpeg_idct} if jpeg_idct != "accurate" else {}))
        self.jpeg_idct = jpeg_idct
        self.tf = tensorflow()
        self.read_errors = self.read_errors + (self.tf.errors.OpError,)

    def check_supported(self, spec: PreprocessSpec) -> None:
        if spec.resize not in TF_METHODS and (spec.size or spec.shorter_side):
            raise UserError(f"tf.image.resize has no {spec.resize!r} method", fix=f"use one of {sorted(TF_METHODS)}")

    def with_spec(self, spec: PreprocessSpec) -> "TFPreprocessor":
        return TFPreprocessor(spec, jpeg_idct=self.jpeg_idct)

    def decode(self, path: Path):
        """uint8 (H, W, 1|3) tensor per the spec's decode rules (libjpeg/libpng chatter on stderr is
        captured and put into the error message)."""
        with captured_output((2,)) as chatter:
            try:
                return self._decode(path)
            except self.tf.errors.OpError as exc:
                detail = " ".join(line.strip() for line in chatter if line.strip())
                message = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", exc.message).split(" [Op:")[0].strip()
                raise ValueError(f"TensorFlow cannot decode it: {message}" + (f" ({detail})" if detail else "")) from exc

    def _decode(self, path: Path):
        tf, spec = self.tf, self.spec
        data = tf.io.read_file(str(path))
        if bool(tf.io.is_jpeg(data)):
            dct = "INTEGER_ACCURATE" if self.jpeg_idct == "accurate" else ""
            image = tf.io.decode_jpeg(data, channels=3, dct_method=dct)
        elif data.numpy()[:8] == b"\x89PNG\r\n\x1a\n":
            image = tf.io.decode_png(data, channels=0, dtype=tf.uint16)
            if spec.high_bit_depth == "round":
                image = tf.cast(tf.round(tf.cast(image, tf.float64) / 257.0), tf.uint8)
            else:
                image = tf.cast(tf.bitwise.right_shift(image, 8), tf.uint8)
        else:
            image = tf.io.decode_image(data, channels=0, expand_animations=False)
        channels = int(image.shape[-1])
        if channels in (2, 4):
            color, alpha = image[..., : channels - 1], image[..., channels - 1 :]
            if spec.alpha == "composite":
                if channels == 2:  # gray + alpha: composited as RGB, like every alpha image
                    color = tf.image.grayscale_to_rgb(color)
                bg = list(spec.background)
                c = tf.cast(color, tf.int32)
                a = tf.cast(alpha, tf.int32)
                bg_t = tf.constant(bg, tf.int32)
                image = tf.cast((c * a + bg_t * (255 - a) + 127) // 255, tf.uint8)
            else:
                image = color
        if spec.exif_orientation:
            image = _orient(tf, image, exif_orientation(path))
        return image

    def _run(self, path: Path) -> np.ndarray:
        tf, spec = self.tf, self.spec
        image = self.decode(path)
        if spec.channels == 1 and image.shape[-1] == 3:
            image = tf.image.rgb_to_grayscale(image)
        elif spec.channels == 3 and image.shape[-1] == 1:
            image = tf.image.grayscale_to_rgb(image)
        geometry = plan_geometry(spec, tuple(int(v) for v in image.shape[:2]))
        pixels = tf.cast(image, tf.float32)
        if geometry.resize_hw is not None:
            resized = tf.image.resize(image, geometry.resize_hw, method=TF_METHODS[spec.resize], antialias=spec.antialias)
            pixels = tf.clip_by_value(tf.cast(resized, tf.float32), 0.0, 255.0)
        if geometry.crop_box is not None:
            top, left, ch, cw = geometry.crop_box
            pixels = tf.image.crop_to_bounding_box(pixels, top, left, ch, cw)
        if spec.color == "bgr":
            pixels = tf.reverse(pixels, axis=[-1])
        mean, std = channel_constants(spec)
        values = (pixels * tf.constant(spec.scale, tf.float32) - tf.constant(mean)) / tf.constant(std)
        if spec.quantized:
            lo, hi = (-128, 127) if spec.dtype == "int8" else (0, 255)
            q = tf.round(tf.cast(values, tf.float64) / spec.quant_scale) + spec.quant_zero_point
            values = tf.cast(tf.clip_by_value(q, lo, hi), tf.int8 if spec.dtype == "int8" else tf.uint8)
        if spec.layout == "NCHW":
            values = tf.transpose(values, [2, 0, 1])
        return values.numpy()

    def notes(self) -> List[str]:
        notes = ["EXIF orientation: TF reads no EXIF; the tag is read with Pillow and applied with tf.image"]
        if self.jpeg_idct == "fast":
            notes.append("JPEG decoded with TF's default INTEGER_FAST IDCT (Pillow/OpenCV: ISLOW)")
        if self.spec.channels == 1:
            notes.append("gray: tf.image.rgb_to_grayscale (0.2989/0.5870/0.1140 in float, truncated): may differ by 1")
        if self.spec.size or self.spec.shorter_side:
            notes.append("resize output stays float (clipped, not rounded): up to 0.5 from Pillow's 8-bit result")
            if self.spec.resize in ("bicubic", "lanczos"):
                notes.append(f"{self.spec.resize}: Pillow rounds/clips between passes, TF does not (overshoot at edges)")
            if self.spec.resize == "box":
                notes.append("box: tf 'area' averages whole source areas like OpenCV INTER_AREA")
        return notes
