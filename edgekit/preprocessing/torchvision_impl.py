"""torchvision implementation: the semantics of ``torchvision.transforms.v2.functional`` on tensors,
written with torch only.

torchvision is NOT installed here (PyPI's torchvision does not import beside torch 2.13 CPU), so
this module reproduces, line for line, what these torchvision functions do on an image tensor
(source: pytorch/vision ``torchvision/transforms/v2/functional/_geometry.py`` ``resize_image``,
``center_crop_image``; ``_color.py`` ``_rgb_to_grayscale_image``; ``_misc.py`` ``to_dtype_image``
and ``normalize_image``):

- decode: Pillow (torchvision's default image loader) with the spec's decode rules, then
  ``pil_to_tensor`` (uint8 CHW, a channels-last view);
- grayscale: ``r*0.2989 + g*0.587 + b*0.114`` in float32, cast back to uint8 (truncation);
- resize: ``torch.nn.functional.interpolate(mode, align_corners=False for bilinear/bicubic,
  antialias)``; uint8 is interpolated directly for nearest, for bicubic on CPU and for bilinear
  when the CPU capability string contains "AVX2"; otherwise via float32, clamped (bicubic) and
  rounded. nearest -> NEAREST_EXACT ("nearest-exact", Pillow's half-pixel rule; ``nearest=legacy``
  gives NEAREST = "nearest", floor(x * scale)). box/hamming/lanczos exist only for PIL images.
- center crop at round((H - h) / 2), to_dtype(float32, scale=True) = x * (1/255), normalize.

When a real torchvision is importable, ``torchvision-real`` runs the same steps through it and the
tests compare the two (skipped here, with the reason).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import List

import numpy as np

from edgekit.errors import ToolMissingError, UserError
from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.preprocessing.base import IMPLEMENTATIONS, SpecPreprocessor
from edgekit.preprocessing.decode import decode_pillow
from edgekit.preprocessing.geometry import plan_geometry

TENSOR_METHODS = ("nearest", "bilinear", "bicubic")


def _torch():
    try:
        import torch
    except ImportError:
        raise ToolMissingError("torch", "pip install torch==2.13.0 (or run `make install`)") from None
    return torch


def real_torchvision():
    """torchvision.transforms.v2.functional, or ToolMissingError with the reason."""
    try:
        from torchvision.transforms.v2 import functional as F  # type: ignore[import-not-found]
    except Exception as exc:  # ImportError, or a binary mismatch with this torch (RuntimeError/OSError)
        raise ToolMissingError(
            "torchvision", f"torchvision cannot be imported here ({type(exc).__name__}: {str(exc)[:120]}); "
            "install a torchvision built for the installed torch",
        ) from exc
    return F


def resize_image(image, size, mode: str, antialias: bool):
    """torchvision v2 ``resize_image`` for a (C, H, W) tensor (see the module docstring)."""
    torch = _torch()
    align_corners = False if mode in ("bilinear", "bicubic") else None
    if mode not in ("bilinear", "bicubic"):
        antialias = False
    num_channels, old_height, old_width = image.shape[-3:]
    new_height, new_width = size
    if (new_height, new_width) == (old_height, old_width):
        return image
    shape = image.shape
    numel = image.numel()
    image = image.reshape(-1, num_channels, old_height, old_width)
    dtype = image.dtype
    acceptable = [torch.float32, torch.float64]
    if mode in ("nearest", "nearest-exact"):
        acceptable.append(torch.uint8)
    elif (mode == "bilinear" and "AVX2" in torch.backends.cpu.get_cpu_capability()) or mode == "bicubic":
        acceptable.append(torch.uint8)
    strides = image.stride()
    if image.is_contiguous(memory_format=torch.channels_last) and image.shape[0] == 1 and numel != strides[0]:
        new_strides = list(strides)
        new_strides[0] = numel
        image = image.as_strided((1, num_channels, old_height, old_width), new_strides)
    need_cast = dtype not in acceptable
    if need_cast:
        image = image.to(dtype=torch.float32)
    image = torch.nn.functional.interpolate(
        image, size=[new_height, new_width], mode=mode, align_corners=align_corners, antialias=antialias
    )
    if need_cast:
        if mode == "bicubic" and dtype == torch.uint8:
            image = image.clamp_(min=0, max=255)
        if dtype in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
            image = image.round_()
        image = image.to(dtype=dtype)
    return image.reshape(shape[:-3] + (num_channels, new_height, new_width))


def rgb_to_grayscale_image(image):
    """torchvision ``_rgb_to_grayscale_image`` (one output channel, dtype preserved)."""
    if image.shape[-3] == 1:
        return image.clone()
    r, g, b = image.unbind(dim=-3)
    l_img = r.mul(0.2989).add_(g, alpha=0.587).add_(b, alpha=0.114)
    return l_img.unsqueeze(dim=-3).to(image.dtype)


def center_crop_anchor(image_hw, crop_hw):
    return int(round((image_hw[0] - crop_hw[0]) / 2.0)), int(round((image_hw[1] - crop_hw[1]) / 2.0))


def to_float(image, scale: float):
    """to_dtype(float32, scale=True) is x * (1/255); other scales: x.to(float32) * scale."""
    torch = _torch()
    if math.isclose(scale, 1.0 / 255.0, rel_tol=1e-12):
        return image.to(torch.float32).mul_(1.0 / 255)
    return image.to(torch.float32).mul_(scale)


def normalize_image(image, mean, std):
    """torchvision ``normalize_image``: (x - mean) / std with float32 mean/std per channel."""
    torch = _torch()
    mean_t = torch.as_tensor(mean, dtype=image.dtype).view(-1, 1, 1)
    std_t = torch.as_tensor(std, dtype=image.dtype).view(-1, 1, 1)
    return image.clone().sub_(mean_t).div_(std_t)


@IMPLEMENTATIONS.register("torchvision")
class TorchvisionPreprocessor(SpecPreprocessor):
    """torchvision.transforms.v2.functional semantics, implemented with torch (see module docstring)."""

    kind = "torchvision"
    library = "torch (torchvision v2 functional semantics, reimplemented)"
    tools = ("torch", "pillow")
    use_real = False

    def __init__(self, spec: PreprocessSpec, *, nearest: str = "exact") -> None:
        if nearest not in ("exact", "legacy"):
            raise UserError(f"torchvision nearest={nearest!r} must be 'exact' or 'legacy'")
        super().__init__(spec, **({"nearest": nearest} if nearest != "exact" else {}))
        self.nearest = nearest
        self.read_errors = self.read_errors + (RuntimeError,)

    def check_supported(self, spec: PreprocessSpec) -> None:
        if spec.resize not in TENSOR_METHODS and (spec.size or spec.shorter_side):
            raise UserError(
                f"torchvision resizes tensors only with {list(TENSOR_METHODS)}, not {spec.resize!r}",
                fix="use the pillow implementation for box/hamming/lanczos",
            )

    def with_spec(self, spec: PreprocessSpec) -> "TorchvisionPreprocessor":
        return type(self)(spec, nearest=self.nearest)

    def _mode(self) -> str:
        if self.spec.resize == "nearest":
            return "nearest-exact" if self.nearest == "exact" else "nearest"
        return self.spec.resize

    def _run(self, path: Path) -> np.ndarray:
        torch = _torch()
        spec = self.spec
        pixels = decode_pillow(path, spec)
        image = torch.from_numpy(np.array(pixels, copy=True)).permute(2, 0, 1)  # pil_to_tensor (writable copy)
        if spec.channels == 1:
            image = self._grayscale(image)
        elif image.shape[0] == 1:
            image = image.repeat(3, 1, 1)
        geometry = plan_geometry(spec, tuple(image.shape[-2:]))
        if geometry.resize_hw is not None:
            image = self._resize(image, geometry.resize_hw)
        if spec.crop is not None:
            image = self._center_crop(image, spec.crop)
        if spec.color == "bgr":
            image = image.flip(0)
        values = self._normalize(self._to_float(image, spec.scale), spec.mean, spec.std)
        if spec.quantized:
            info = torch.iinfo(torch.int8 if spec.dtype == "int8" else torch.uint8)
            q = torch.round(values.double() / spec.quant_scale) + spec.quant_zero_point
            values = q.clamp_(info.min, info.max).to(torch.int8 if spec.dtype == "int8" else torch.uint8)
        if spec.layout == "NHWC":
            values = values.permute(1, 2, 0)
        return values.contiguous().numpy()

    # the three steps below are swapped for torchvision's own functions in torchvision-real
    def _grayscale(self, image):
        return rgb_to_grayscale_image(image)

    def _resize(self, image, size):
        return resize_image(image, size, self._mode(), self.spec.antialias)

    def _center_crop(self, image, crop):
        top, left = center_crop_anchor(tuple(image.shape[-2:]), crop)
        return image[..., top : top + crop[0], left : left + crop[1]]

    def _to_float(self, image, scale):
        return to_float(image, scale)

    def _normalize(self, image, mean, std):
        return normalize_image(image, mean, std)

    def notes(self) -> List[str]:
        notes = ["torchvision is not installed here: its v2 functional semantics are reimplemented with torch"
                 if not self.use_real else "runs torchvision.transforms.v2.functional"]
        resizes = bool(self.spec.size or self.spec.shorter_side)
        if self.spec.channels == 1:
            notes.append("gray: 0.2989 R + 0.587 G + 0.114 B truncated to uint8 (Pillow: rounded 16-bit luma): "
                         "typically 0-1 lower")
        if resizes and self.spec.resize in ("bilinear", "bicubic"):
            torch = _torch()
            native = self.spec.resize == "bicubic" or "AVX2" in torch.backends.cpu.get_cpu_capability()
            notes.append(
                f"{self.spec.resize} on uint8 "
                + ("directly (torch's Pillow-like uint8 kernel)" if native else
                   f"via float32 (CPU capability {torch.backends.cpu.get_cpu_capability()} lacks 'AVX2'), rounded once")
                + ": Pillow rounds after each pass"
            )
        if resizes and self.spec.resize == "bicubic" and not self.spec.antialias:
            notes.append("bicubic without antialias uses a = -0.75 (Pillow -0.5)")
        if resizes and self.spec.resize == "nearest" and self.nearest == "legacy":
            notes.append("InterpolationMode.NEAREST picks floor(x * scale), not the nearest pixel center")
        return notes


@IMPLEMENTATIONS.register("torchvision-real")
class RealTorchvisionPreprocessor(TorchvisionPreprocessor):
    """The same pipeline through an installed torchvision (ToolMissingError when it cannot import)."""

    kind = "torchvision-real"
    library = "torchvision.transforms.v2.functional"
    tools = ("torch", "torchvision", "pillow")
    use_real = True

    def __init__(self, spec: PreprocessSpec, **options) -> None:
        self.F = real_torchvision()
        super().__init__(spec, **options)

    def _grayscale(self, image):
        return self.F.rgb_to_grayscale(image, num_output_channels=1)

    def _resize(self, image, size):
        InterpolationMode = __import__("torchvision.transforms", fromlist=["InterpolationMode"]).InterpolationMode
        mode = {"nearest-exact": InterpolationMode.NEAREST_EXACT, "nearest": InterpolationMode.NEAREST,
                "bilinear": InterpolationMode.BILINEAR, "bicubic": InterpolationMode.BICUBIC}[self._mode()]
        return self.F.resize(image, list(size), interpolation=mode, antialias=self.spec.antialias)

    def _center_crop(self, image, crop):
        return self.F.center_crop(image, list(crop))

    def _to_float(self, image, scale):
        torch = _torch()
        if math.isclose(scale, 1.0 / 255.0, rel_tol=1e-12):
            return self.F.to_dtype(image, torch.float32, scale=True)
        return self.F.to_dtype(image, torch.float32, scale=False).mul_(scale)

    def _normalize(self, image, mean, std):
        return self.F.normalize(image, list(mean), list(std))
