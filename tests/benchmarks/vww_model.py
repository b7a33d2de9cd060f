#!/usr/bin/env python
"""A MobileNet-v1 0.25, 96x96x3 -> 2 classes int8 .tflite: the MLPerf Tiny visual-wake-words architecture.

Built deterministically (fixed seeded weights and BatchNorm statistics, no training, no download) as a Keras
model, then quantized to full int8 with edgekit's own quantizer (`edgekit.quantize.quantize`, the TFLiteConverter
path: int8 input and output, per-channel weights) on seeded calibration images. The graph is the one MLPerf Tiny's
`vww_model.py` defines (mobilenet_v1, alpha 0.25): a 3x3 stride-2 CONV_2D with 8 filters, 13 depthwise-separable
blocks (3x3 DEPTHWISE_CONV_2D + 1x1 CONV_2D, BatchNorm folded, ReLU fused), AVERAGE_POOL_2D 3x3, RESHAPE,
FULLY_CONNECTED 256 -> 2 and SOFTMAX. 7.49 M multiply-accumulates.

    from tests.benchmarks.vww_model import vww_int8, calibration_images
    model_bytes = vww_int8()                 # cached: $EDGEKIT_CACHE_DIR/vww_model/<key>/model_int8.tflite
    python tests/benchmarks/vww_model.py [-o vww_int8.tflite]

The cache key covers this file's source, the variant and the TensorFlow version, so a changed builder never reuses a
stale model. The weights are random: the model's accuracy means nothing, only its shapes, quantization and cost do.

Two variants of the statistics (same graph, same seeded kernels):
- `vww_int8()`: random BatchNorm statistics near 1 (every filter alive, per-channel scales within ~2x);
- `vww_int8(trained_like=True)`: statistics as a trained network has them (issue 25): BatchNorm gammas
  log-uniform over 3.5 decades, ~8 % dead filters (gamma 1e-9..1e-7: folded weights ~0, so per-channel output
  multipliers down to ~1e-12 and bias-only, constant outputs) and ~4 % near-zero kernels. This is the one
  bench_firmware_mlperf.py measures as `VWW-T`: it exercises the per-channel parameter ranges the random model
  never has (right shifts far beyond 31, huge folded biases, channels whose output is constant).
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

import numpy as np  # noqa: E402

INPUT_SHAPE = (1, 96, 96, 3)
NUM_CLASSES = 2
ALPHA = 0.25
SEED = 20261201
CALIBRATION_COUNT = 64
# (pointwise filters at alpha 1, depthwise stride) of MobileNet-v1's 13 depthwise-separable blocks
BLOCKS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1), (512, 1), (512, 1),
          (512, 1), (1024, 2), (1024, 1))


def trained_like_batchnorm(rng: np.random.Generator, n: int) -> list:
    """(gamma, beta, mean, var) as a trained network's BatchNorm has them: gammas spanning 3.5 decades and ~8 %
    dead channels (gamma ~1e-9..1e-7, their output is the bias alone)."""
    gamma = 10.0 ** rng.uniform(-3.0, 0.5, n)
    dead = rng.random(n) < 0.08
    gamma[dead] = 10.0 ** rng.uniform(-9.0, -7.0, int(dead.sum()))
    gamma *= rng.choice([-1.0, 1.0], n, p=[0.1, 0.9])
    beta = 0.3 * rng.standard_normal(n)
    mean, var = 0.2 * rng.standard_normal(n), 10.0 ** rng.uniform(-2.0, 1.0, n)
    return [gamma, beta, mean, var]


def build_keras(seed: int = SEED, trained_like: bool = False):
    """The float Keras model with fixed seeded weights (He-normal convolutions, random BatchNorm statistics, or
    trained-like ones: see the module docstring)."""
    import keras
    from keras import layers

    inputs = keras.Input(shape=INPUT_SHAPE[1:], batch_size=1, name="input")
    x = layers.Conv2D(int(32 * ALPHA), 3, strides=2, padding="same", use_bias=False)(inputs)
    x = layers.ReLU()(layers.BatchNormalization()(x))
    for filters, stride in BLOCKS:
        x = layers.DepthwiseConv2D(3, strides=stride, padding="same", use_bias=False)(x)
        x = layers.ReLU()(layers.BatchNormalization()(x))
        x = layers.Conv2D(int(filters * ALPHA), 1, padding="same", use_bias=False)(x)
        x = layers.ReLU()(layers.BatchNormalization()(x))
    x = layers.AveragePooling2D(pool_size=tuple(int(d) for d in x.shape[1:3]))(x)
    x = layers.Flatten()(x)
    outputs = layers.Dense(NUM_CLASSES, activation="softmax")(x)
    model = keras.Model(inputs, outputs, name="vww_mobilenet_v1_025")
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        weights = layer.get_weights()
        if not weights:
            continue
        if isinstance(layer, layers.BatchNormalization):
            n = weights[0].shape[0]
            if trained_like:
                layer.set_weights([w.astype(np.float32) for w in trained_like_batchnorm(rng, n)])
                continue
            gamma, beta = 1.0 + 0.2 * rng.standard_normal(n), 0.1 * rng.standard_normal(n)
            mean, var = 0.1 * rng.standard_normal(n), 0.5 + rng.random(n)
            layer.set_weights([w.astype(np.float32) for w in (gamma, beta, mean, var)])
            continue
        kernel = weights[0]
        fan_in = int(np.prod(kernel.shape[:2])) * (1 if isinstance(layer, layers.DepthwiseConv2D) else kernel.shape[-2])
        if isinstance(layer, layers.Dense):
            fan_in = kernel.shape[0]
        scaled = rng.standard_normal(kernel.shape) * np.sqrt(2.0 / fan_in)
        if trained_like and not isinstance(layer, layers.Dense):  # ~4 % near-zero filters (last axis: outputs)
            scaled[..., rng.random(kernel.shape[-1]) < 0.04] *= 1e-6
        new = [scaled.astype(np.float32)]
        new += [(0.1 * rng.standard_normal(w.shape)).astype(np.float32) for w in weights[1:]]
        layer.set_weights(new)
    return model


def calibration_images(count: int = CALIBRATION_COUNT, seed: int = 0) -> np.ndarray:
    """`count` seeded (count, 96, 96, 3) float32 images in [0, 1]: coloured sine gratings plus a blob and noise."""
    rng = np.random.default_rng(seed)
    h, w = INPUT_SHAPE[1:3]
    yy, xx = np.meshgrid(np.arange(h, dtype=np.float32), np.arange(w, dtype=np.float32), indexing="ij")
    out = np.empty((count, h, w, 3), np.float32)
    for i in range(count):
        fx, fy = rng.uniform(0.05, 0.6, 2) * rng.choice([-1.0, 1.0], 2)
        wave = np.sin(fx * xx + fy * yy + rng.uniform(0.0, 6.3))
        cy, cx, r = rng.uniform(0, h), rng.uniform(0, w), rng.uniform(8, 30)
        blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r))
        colour, base, tint = rng.uniform(-0.4, 0.4, 3), rng.uniform(0.2, 0.8, 3), rng.uniform(-0.5, 0.5, 3)
        img = base + colour * wave[..., None] + tint * blob[..., None] + 0.03 * rng.standard_normal((h, w, 3))
        out[i] = np.clip(img, 0.0, 1.0)
    return out


def cache_key(trained_like: bool = False) -> str:
    import tensorflow as tf

    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(tf.__version__.encode())
    digest.update(b"trained-like" if trained_like else b"random")
    return digest.hexdigest()[:16]


def cache_dir(trained_like: bool = False) -> Path:
    base = os.environ.get("EDGEKIT_CACHE_DIR") or os.path.join(tempfile.gettempdir(), "edgekit-cache")
    return Path(base) / "vww_model" / cache_key(trained_like)


def vww_int8(trained_like: bool = False) -> bytes:
    """The int8 .tflite (built and quantized once per cache key, then read from the cache)."""
    folder = cache_dir(trained_like)
    model_path = folder / "model_int8.tflite"
    if model_path.is_file():
        return model_path.read_bytes()
    from edgekit.quantize import QuantizeOptions, quantize

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vww_build_", dir=folder) as tmp:
        work = Path(tmp)
        keras_path = work / "vww_float.keras"
        build_keras(trained_like=trained_like).save(keras_path)
        calib = work / "calib.npy"
        np.save(calib, calibration_images())
        result = quantize(str(keras_path), calib, work / "out", QuantizeOptions())
        data = (result.outdir / result.main_file).read_bytes()
        np.save(folder / "calib.npy", calibration_images())
        partial = folder / f".model_int8.{os.getpid()}.tflite"
        partial.write_bytes(data)
        os.replace(partial, model_path)  # atomic: parallel builders never see half a file
    return data


vww_model_bytes = vww_int8  # the name tests/benchmarks/bench_firmware_mlperf.py looks up


def vww_trained_like_int8() -> bytes:
    """The trained-like variant (bench_firmware_mlperf.py's `VWW-T`)."""
    return vww_int8(trained_like=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=None, help="also copy the int8 .tflite here")
    parser.add_argument("--trained-like", action="store_true", help="the trained-like statistics variant")
    args = parser.parse_args()
    data = vww_int8(args.trained_like)
    from edgekit.tflite_graph import read_graph

    graph = read_graph(data)
    print(f"{cache_dir(args.trained_like) / 'model_int8.tflite'}: {len(data):,} bytes, {sum(graph.macs().values()):,} MACs")
    if args.output:
        args.output.write_bytes(data)
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
