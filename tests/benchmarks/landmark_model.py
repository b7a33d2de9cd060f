#!/usr/bin/env python
"""A hand-landmark-style int8 .tflite (MediaPipe hand landmark blocks) in two forms with the same weights: padding
inside the depthwise convolutions (SAME) or as separate PAD ops before VALID depthwise convolutions (issue 29).

Blocks (depthwise k x k, stride s, then a 1x1 CONV_2D, BatchNorm folded, ReLU6 fused), input 56x56x24 int8:
5x5 and 3x3 kernels, stride 1 and 2 (stride 2 on even sizes: SAME pads asymmetrically, 1 before and 2 after for
5x5, 0 and 1 for 3x3), 24-256 channels, maps 56/28/14/7/4, one depth multiplier 2 layer. Built deterministically
(seeded weights and trained-like BatchNorm statistics as tests/benchmarks/vww_model.py's `trained_like_batchnorm`:
gammas over 3.5 decades, ~8 % dead filters; no training, no download) as Keras models, quantized to full int8 with edgekit's own quantizer
(`edgekit.quantize.quantize`, the TFLiteConverter path) on seeded calibration data. The PAD form is derived from the
quantized SAME model by editing the flatbuffer (`pad_form`): before every padded DEPTHWISE_CONV_2D a PAD op pads
exactly what SAME pads (with the input's zero point: TFLite's PAD does), and the depthwise op becomes VALID. Same
weights, same quantization, the same int8 function (the converter itself fuses a ZeroPadding2D + VALID pair back
into SAME, so a Keras PAD form would not keep the PAD ops).

    from tests.benchmarks.landmark_model import landmark_int8
    same = landmark_int8(padding="same"); pad = landmark_int8(padding="pad")
    python tests/benchmarks/landmark_model.py [--padding same|pad] [-o out.tflite]

Input size: with a 112x112x24 input and these trained-like statistics the QEMU runs failed here ("the device stopped
accepting data (write blocked 30 s)") with this runtime and with the one before the constant-channel change alike
(the random-statistics 112x112 form ran); not investigated, so the benchmark uses 56x56.

Cached under $EDGEKIT_CACHE_DIR/landmark_model/<key>/ (key: this file's source, the form, the TensorFlow version).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
if str(REPO / "tests" / "benchmarks") not in sys.path:
    sys.path.insert(0, str(REPO / "tests" / "benchmarks"))

import numpy as np  # noqa: E402

INPUT_SHAPE = (1, 56, 56, 24)
SEED = 20261203
CALIBRATION_COUNT = 16
PADDINGS = ("same", "pad")
# (depthwise kernel, stride, depth multiplier, pointwise filters) per block
BLOCKS = ((5, 1, 1, 24), (5, 2, 1, 48), (3, 1, 1, 48), (5, 1, 1, 48), (3, 2, 1, 96), (5, 1, 1, 96), (3, 1, 2, 96),
          (5, 2, 1, 192), (5, 1, 1, 192), (3, 1, 1, 256), (5, 2, 1, 256), (5, 1, 1, 256))


def _same_pads(size: int, kernel: int, stride: int) -> tuple:
    out = (size + stride - 1) // stride
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def build_keras(seed: int = SEED):
    """The float Keras model (padding SAME inside the depthwise ops)."""
    import keras
    from keras import layers

    inputs = keras.Input(shape=INPUT_SHAPE[1:], batch_size=1, name="input")
    x = inputs
    for kernel, stride, mult, filters in BLOCKS:
        x = layers.DepthwiseConv2D(kernel, strides=stride, depth_multiplier=mult, padding="same", use_bias=False)(x)
        x = layers.ReLU(6.0)(layers.BatchNormalization()(x))
        x = layers.Conv2D(filters, 1, padding="valid", use_bias=False)(x)
        x = layers.ReLU(6.0)(layers.BatchNormalization()(x))
    model = keras.Model(inputs, x, name="hand_landmark_style")
    from vww_model import trained_like_batchnorm

    rng = np.random.default_rng(seed)
    for layer in model.layers:
        weights = layer.get_weights()
        if not weights:
            continue
        if isinstance(layer, layers.BatchNormalization):
            layer.set_weights([w.astype(np.float32) for w in trained_like_batchnorm(rng, weights[0].shape[0])])
            continue
        kernel = weights[0]
        fan_in = int(np.prod(kernel.shape[:2])) * (1 if isinstance(layer, layers.DepthwiseConv2D) else kernel.shape[-2])
        new = [(rng.standard_normal(kernel.shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)]
        new += [(0.1 * rng.standard_normal(w.shape)).astype(np.float32) for w in weights[1:]]
        layer.set_weights(new)
    return model


def calibration_data(count: int = CALIBRATION_COUNT, seed: int = 0) -> np.ndarray:
    """`count` seeded float32 feature maps in [0, 6] (what a ReLU6 stem produces)."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.gamma(1.5, 1.0, (count,) + INPUT_SHAPE[1:]), 0.0, 6.0).astype(np.float32)


def pad_form(model: bytes) -> bytes:
    """The same int8 model with every SAME-padded DEPTHWISE_CONV_2D split into PAD (the SAME amounts, int32
    paddings [[0, 0], [top, bottom], [left, right], [0, 0]]) + the depthwise op with VALID padding."""
    from tensorflow.lite.python import schema_py_generated as fb
    from tensorflow.lite.tools import flatbuffer_utils

    m = flatbuffer_utils.convert_bytearray_to_object(bytearray(model))
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in m.operatorCodes]
    if fb.BuiltinOperator.PAD not in codes:
        code = fb.OperatorCodeT()
        code.builtinCode = fb.BuiltinOperator.PAD
        code.deprecatedBuiltinCode = fb.BuiltinOperator.PAD
        code.version = 2
        m.operatorCodes.append(code)
        codes.append(fb.BuiltinOperator.PAD)
    pad_index = codes.index(fb.BuiltinOperator.PAD)
    g = m.subgraphs[0]
    ops = []
    for op in g.operators:
        opt = op.builtinOptions
        if codes[op.opcodeIndex] == fb.BuiltinOperator.DEPTHWISE_CONV_2D and opt.padding == fb.Padding.SAME:
            src = g.tensors[op.inputs[0]]
            k = g.tensors[op.inputs[1]].shape
            n, h, w, c = (int(v) for v in src.shape)
            top, bottom = _same_pads(h, int(k[1]), opt.strideH)
            left, right = _same_pads(w, int(k[2]), opt.strideW)
            if top or bottom or left or right:
                buf = fb.BufferT()
                buf.data = np.array([[0, 0], [top, bottom], [left, right], [0, 0]], np.int32).tobytes()
                m.buffers.append(buf)
                pads = fb.TensorT()
                pads.shape, pads.type, pads.buffer = [4, 2], fb.TensorType.INT32, len(m.buffers) - 1
                pads.name = (src.name or b"t") + b"/paddings"
                padded = fb.TensorT()
                padded.shape, padded.type, padded.buffer = [n, h + top + bottom, w + left + right, c], src.type, 0
                padded.name = (src.name or b"t") + b"/padded"
                padded.quantization = src.quantization  # PAD keeps the input's scale and zero point
                g.tensors += [pads, padded]
                pad_op = fb.OperatorT()
                pad_op.opcodeIndex = pad_index
                pad_op.inputs = [op.inputs[0], len(g.tensors) - 2]
                pad_op.outputs = [len(g.tensors) - 1]
                pad_op.builtinOptionsType = fb.BuiltinOptions.PadOptions
                pad_op.builtinOptions = fb.PadOptionsT()
                ops.append(pad_op)
                op.inputs = [len(g.tensors) - 1] + list(op.inputs[1:])
            opt.padding = fb.Padding.VALID
        ops.append(op)
    g.operators = ops
    return bytes(flatbuffer_utils.convert_object_to_bytearray(m))


def cache_dir(padding: str) -> Path:
    import tensorflow as tf

    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(tf.__version__.encode())
    digest.update(padding.encode())
    base = os.environ.get("EDGEKIT_CACHE_DIR") or os.path.join(tempfile.gettempdir(), "edgekit-cache")
    return Path(base) / "landmark_model" / digest.hexdigest()[:16]


def landmark_int8(padding: str = "same") -> bytes:
    """The int8 .tflite of one form (built and quantized once per cache key, then read from the cache)."""
    folder = cache_dir(padding)
    model_path = folder / "model_int8.tflite"
    if model_path.is_file():
        return model_path.read_bytes()
    if padding not in PADDINGS:
        raise ValueError(f"padding must be one of {PADDINGS}, not {padding!r}")
    if padding == "pad":
        data = pad_form(landmark_int8("same"))
        folder.mkdir(parents=True, exist_ok=True)
        partial = folder / f".model_int8.{os.getpid()}.tflite"
        partial.write_bytes(data)
        os.replace(partial, model_path)
        return data
    from edgekit.quantize import QuantizeOptions, quantize

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="landmark_build_", dir=folder) as tmp:
        work = Path(tmp)
        keras_path = work / "landmark_float.keras"
        build_keras().save(keras_path)
        calib = work / "calib.npy"
        np.save(calib, calibration_data())
        result = quantize(str(keras_path), calib, work / "out", QuantizeOptions())
        data = (result.outdir / result.main_file).read_bytes()
        partial = folder / f".model_int8.{os.getpid()}.tflite"
        partial.write_bytes(data)
        os.replace(partial, model_path)  # atomic: parallel builders never see half a file
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--padding", choices=PADDINGS, default="same")
    parser.add_argument("-o", "--output", type=Path, default=None, help="also copy the int8 .tflite here")
    args = parser.parse_args()
    data = landmark_int8(args.padding)
    from edgekit.tflite_graph import read_graph

    graph = read_graph(data)
    print(f"{cache_dir(args.padding) / 'model_int8.tflite'}: {len(data):,} bytes, {sum(graph.macs().values()):,} MACs, "
          f"ops {graph.op_names}")
    if args.output:
        args.output.write_bytes(data)
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
