"""Generate the C preprocessing code for firmware from a PreprocessSpec.

``generate_c(spec, input_size=(H, W), input_format="rgb888")`` returns
``{filename: text}``: the engine (``ek_preprocess.h``, ``ek_preprocess.c``, copied from
firmware/preprocess/) and the generated tables (``<symbol>.h``, ``<symbol>.c``). The C entry point::

    ek_pp_status ek_preprocess(const ek_pp_config *cfg, const uint8_t *input, size_t input_bytes,
                               void *output, size_t output_bytes, uint8_t *scratch, size_t scratch_bytes);

called with ``&<symbol>`` (e.g. ``&ek_pp_digits_8x8_gray``), a camera frame of ``<SYMBOL>_INPUT_BYTES``
bytes (rows of H x W pixels in the input format: gray8, rgb888 or bgr888), the model-input buffer
(``<SYMBOL>_OUTPUT_BYTES``) and a scratch buffer (``<SYMBOL>_SCRATCH_BYTES``).

Arithmetic: fixed point and integer only. Resize and crop are Pillow's 8-bit resampling algorithm
with Q22 weights precomputed here (``edgekit.preprocessing.resample``, bit-exact with Pillow);
RGB->gray is Pillow's 16-bit luma; the pass order (horizontal or vertical first) is Pillow's
for the frame size; the value stage is a per-channel 256-entry table (float32,
int8 or uint8) computed with the reference's numpy arithmetic. The output equals the Pillow
reference bit for bit, given the same decoded pixels (decoding and EXIF orientation happen
before: on a device the camera delivers pixels).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np

from edgekit import __version__
from edgekit._resources import data_dir
from edgekit.errors import UserError
from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.preprocessing.geometry import plan_geometry
from edgekit.preprocessing.resample import PRECISION_BITS, axis_coefficients, nearest_indices, pillow_pass_order
from edgekit.preprocessing.values import lookup_tables

ENGINE_DIR = data_dir("firmware") / "preprocess"
INPUT_FORMATS = {"gray8": ("EK_PP_GRAY8", 1), "rgb888": ("EK_PP_RGB888", 3), "bgr888": ("EK_PP_BGR888", 3)}
DTYPES = {"float32": ("EK_PP_FLOAT32", "float", 4), "int8": ("EK_PP_INT8", "int8_t", 1), "uint8": ("EK_PP_UINT8", "uint8_t", 1)}
MAX_DIM = 65535


@dataclass(frozen=True)
class Axis:
    start: np.ndarray  # int32 (out,)
    count: np.ndarray  # uint16 (out,)
    weights: np.ndarray  # int32 (out, ksize)


@dataclass(frozen=True)
class PreprocessTables:
    """Everything the C engine needs, for one spec, input size and input pixel format."""

    spec: PreprocessSpec
    input_hw: Tuple[int, int]
    input_format: str
    output_hw: Tuple[int, int]
    horizontal: Axis
    vertical: Axis
    channel_map: Tuple[int, ...]
    lut: np.ndarray  # (C, 256)
    vertical_first: bool = False  # Pillow's pass order for these sizes (resample.pillow_pass_order)

    @property
    def channels(self) -> int:
        return self.spec.channels

    @property
    def ring_rows(self) -> int:
        return 1 if self.vertical_first else int(self.vertical.count.max())

    @property
    def scratch_bytes(self) -> int:
        if self.vertical_first:
            return self.input_hw[1] * self.channels
        return self.ring_rows * self.output_hw[1] * self.channels

    @property
    def output_bytes(self) -> int:
        return self.output_hw[0] * self.output_hw[1] * self.channels * DTYPES[self.spec.dtype][2]

    @property
    def input_bytes(self) -> int:
        return self.input_hw[0] * self.input_hw[1] * INPUT_FORMATS[self.input_format][1]


def _axis(in_size: int, resized: int, first: int, n: int, spec: PreprocessSpec) -> Axis:
    one = np.full((n, 1), 1 << PRECISION_BITS, np.int32)
    if resized == in_size:
        return Axis(np.arange(first, first + n, dtype=np.int32), np.ones(n, np.uint16), one)
    if spec.resize == "nearest":
        return Axis(nearest_indices(in_size, resized)[first : first + n].astype(np.int32), np.ones(n, np.uint16), one)
    coeffs = axis_coefficients(in_size, resized, spec.resize, antialias=spec.antialias)
    count = coeffs.count[first : first + n]
    ksize = int(count.max())
    return Axis(coeffs.start[first : first + n].astype(np.int32), count.astype(np.uint16),
                np.ascontiguousarray(coeffs.weights[first : first + n, :ksize]))


def build_tables(spec: PreprocessSpec, input_size: Tuple[int, int], input_format: str = "rgb888") -> PreprocessTables:
    """Resize/crop tables, channel map and value tables for frames of ``input_size`` (H, W)."""
    if input_format not in INPUT_FORMATS:
        raise UserError(f"input format {input_format!r} must be one of {sorted(INPUT_FORMATS)}")
    if spec.quantized and spec.quant_scale is None:
        raise UserError(f"spec {spec.name!r} takes its quantization from the model; resolve it first "
                        "(PreprocessSpec.with_quantization(scale, zero_point))")
    in_h, in_w = int(input_size[0]), int(input_size[1])
    if not (0 < in_h <= MAX_DIM and 0 < in_w <= MAX_DIM):
        raise UserError(f"input size {in_h}x{in_w} must be within 1..{MAX_DIM} per side")
    geometry = plan_geometry(spec, (in_h, in_w))
    rh, rw = geometry.resized_hw
    top, left, out_h, out_w = geometry.crop_box or (0, 0, rh, rw)
    channel_map = (2, 1, 0) if spec.color == "bgr" else tuple(range(spec.channels))
    vertical_first = (
        geometry.resize_hw is not None and spec.antialias and spec.resize != "nearest"
        and pillow_pass_order((in_h, in_w), (rh, rw), spec.resize) == "vh"
    )
    return PreprocessTables(
        spec=spec, input_hw=(in_h, in_w), input_format=input_format, output_hw=(out_h, out_w),
        horizontal=_axis(in_w, rw, left, out_w, spec), vertical=_axis(in_h, rh, top, out_h, spec),
        channel_map=channel_map, lut=lookup_tables(spec), vertical_first=vertical_first,
    )


def c_symbol(name: str) -> str:
    ident = re.sub(r"[^0-9a-zA-Z]+", "_", name).strip("_").lower() or "model"
    return f"ek_pp_{ident}"


def _array(ctype: str, name: str, values, fmt=str, per_line: int = 12) -> str:
    items = [fmt(v) for v in np.asarray(values).ravel().tolist()]
    lines = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
    return f"static const {ctype} {name}[{len(items)}] = {{\n  " + ",\n  ".join(lines) + "\n};\n"


def _float(v: float) -> str:
    return float(np.float32(v)).hex() + "f"


def generate_c(
    spec: PreprocessSpec, *, input_size: Optional[Tuple[int, int]] = None, input_format: str = "rgb888",
    symbol: Optional[str] = None,
) -> Dict[str, str]:
    """C sources for ``spec`` on frames of ``input_size`` (H, W; default: the spec's fixed size).

    Returns {filename: text}: ek_preprocess.h, ek_preprocess.c (the engine) and <symbol>.h/.c.
    """
    if input_size is None:
        if spec.size is None or spec.shorter_side is not None:
            raise UserError("generate_c needs input_size=(height, width): the camera frame size",
                            fix="pass the frame size the firmware delivers")
        input_size = tuple(spec.size)
    tables = build_tables(spec, input_size, input_format)
    symbol = symbol or c_symbol(spec.name)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", symbol):
        raise UserError(f"symbol {symbol!r} is not a C identifier")
    macro = symbol.upper()
    dtype_enum, lut_ctype, _ = DTYPES[spec.dtype]
    spec_json = json.dumps(spec.to_dict(), sort_keys=True)
    digest = hashlib.sha256(spec_json.encode()).hexdigest()
    (in_h, in_w), (out_h, out_w) = tables.input_hw, tables.output_hw
    banner = (
        f"/* Generated by edgekit {__version__} (edgekit.preprocessing.codegen) - do not edit.\n"
        f" * spec {spec.name!r} sha256 {digest}\n * {spec.describe()}\n"
        f" * input {in_h}x{in_w} {input_format} -> output {out_h}x{out_w}x{spec.channels} {spec.layout} {spec.dtype}\n */\n"
    )
    header = (
        banner + f"#ifndef {macro}_H\n#define {macro}_H\n\n#include \"ek_preprocess.h\"\n\n"
        f"#define {macro}_IN_HEIGHT {in_h}\n#define {macro}_IN_WIDTH {in_w}\n"
        f"#define {macro}_OUT_HEIGHT {out_h}\n#define {macro}_OUT_WIDTH {out_w}\n#define {macro}_CHANNELS {spec.channels}\n"
        f"#define {macro}_INPUT_BYTES {tables.input_bytes}u\n#define {macro}_OUTPUT_BYTES {tables.output_bytes}u\n"
        f"#define {macro}_SCRATCH_BYTES {tables.scratch_bytes}u\n\nextern const ek_pp_config {symbol};\n\n#endif\n"
    )
    h, v = tables.horizontal, tables.vertical
    lut_fmt = _float if spec.dtype == "float32" else str
    body = banner + f"#include \"{symbol}.h\"\n\n"
    body += _array("int32_t", "h_start", h.start) + _array("uint16_t", "h_count", h.count)
    body += _array("int32_t", "h_weights", h.weights, per_line=8)
    body += _array("int32_t", "v_start", v.start) + _array("uint16_t", "v_count", v.count)
    body += _array("int32_t", "v_weights", v.weights, per_line=8)
    body += _array(lut_ctype, "lut", tables.lut, fmt=lut_fmt, per_line=8)
    channel_map = list(tables.channel_map) + [0] * (3 - len(tables.channel_map))
    body += (
        f"\nconst ek_pp_config {symbol} = {{\n"
        f"  {in_w}, {in_h}, {INPUT_FORMATS[input_format][0]}, {spec.channels},\n"
        f"  {out_w}, {out_h},\n"
        f"  {{h_start, h_count, h_weights, {h.weights.shape[1]}}},\n"
        f"  {{v_start, v_count, v_weights, {v.weights.shape[1]}}},\n"
        f"  {int(tables.vertical_first)}, {tables.ring_rows},\n"
        f"  {{{', '.join(str(c) for c in channel_map)}}},\n"
        f"  {'EK_PP_NHWC' if spec.layout == 'NHWC' else 'EK_PP_NCHW'}, {dtype_enum},\n"
        f"  lut,\n  {tables.scratch_bytes}u,\n  {tables.output_bytes}u,\n}};\n"
    )
    return {
        "ek_preprocess.h": (ENGINE_DIR / "ek_preprocess.h").read_text(),
        "ek_preprocess.c": (ENGINE_DIR / "ek_preprocess.c").read_text(),
        f"{symbol}.h": header,
        f"{symbol}.c": body,
    }
