#!/usr/bin/env python
"""`edgekit quantize` vs the bare TFLiteConverter call, and parity throughput vs a bare LiteRT loop,
on a MobileNetV2 160x160 (keras.applications, weights=None) in ONE process.

  bare     tf.lite.TFLiteConverter.from_keras_model + representative_dataset (the same 64 calibration
           samples), optimizations=[DEFAULT], TFLITE_BUILTINS_INT8, int8 in/out
  edgekit  edgekit.quantize.quantize(model.keras, calib.npy, --eval-data eval.npy) with a FRESH
           statistics cache (export + statistics + int8 + parity on the optimized kernels + outputs)
  parity   edgekit.parity.compare (float vs int8, optimized kernels) on the eval samples vs a bare loop
           set_tensor/invoke/get_tensor over the same two interpreters (same kernels, same samples)
  kernels  ms per inference on BUILTIN_REF vs BUILTIN_WITHOUT_DEFAULT_DELEGATES (why parity moved)

Targets: edgekit <= 1.3x bare; parity within 1.2x of the bare loop. --smoke runs every step on MobileNetV2 32x32
alpha 0.35 cut after its third block (a pooled dense head), 8 samples: the figures are not the targets' figures.

The untrained network's activations collapse or blow up through 17 blocks with BatchNorm's default
moving statistics (mean 0, variance 1); the model gets a seeded init and its BatchNorm moving statistics
set from one training-mode pass over random images (momentum 0), so every layer sees unit-scale values.

    .venv/bin/python tests/benchmarks/bench_optimized_kernels.py [--smoke] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

SMOKE_LAST_LAYER = "block_2_add"  # --smoke keeps the stem and the first 3 inverted-residual blocks (one with its add)


def build_model(tf, size: int, alpha: float, seed: int):
    """MobileNetV2 (weights=None), seeded, BatchNorm moving stats from one training-mode pass."""
    tf.keras.utils.set_random_seed(seed)
    model = tf.keras.applications.MobileNetV2(input_shape=(size, size, 3), alpha=alpha, weights=None, classes=10,
                                              classifier_activation=None)
    bns = [layer for layer in model.layers if isinstance(layer, tf.keras.layers.BatchNormalization)]
    momenta = [bn.momentum for bn in bns]
    for bn in bns:
        bn.momentum = 0.0
    x = np.random.default_rng(seed).uniform(-1, 1, (16, size, size, 3)).astype(np.float32)
    model(x, training=True)
    for bn, m in zip(bns, momenta):
        bn.momentum = m
    return model


def first_blocks(tf, model, last: str, classes: int = 10):
    """The network up to layer ``last`` with a pooled dense head (--smoke: the same layer kinds, conv, depthwise,
    BatchNorm, ReLU6, residual add, dense, in a graph a few times smaller, so each conversion takes seconds)."""
    x = tf.keras.layers.GlobalAveragePooling2D()(model.get_layer(last).output)
    return tf.keras.Model(model.input, tf.keras.layers.Dense(classes)(x), name=f"{model.name}_to_{last}")


def timed(fn):
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true",
                    help="tiny model (32x32, alpha 0.35, up to block 2) and data (seconds): checks the script runs")
    ap.add_argument("--calib", type=int, default=64)
    ap.add_argument("--eval", type=int, default=64)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    size, alpha = (160, 1.0) if not args.smoke else (32, 0.35)
    n_calib, n_eval = (args.calib, args.eval) if not args.smoke else (8, 8)

    work = Path(tempfile.mkdtemp(prefix="edgekit-bench-kernels-"))
    os.environ["EDGEKIT_CACHE_DIR"] = str(work / "cache")  # first run: no statistics cache

    from edgekit.quiet import captured_output

    with captured_output((2,)):
        import tensorflow as tf
    import edgekit.quantize as eq
    from edgekit.converters import load_backends
    from edgekit.parity.compare import compare
    from edgekit.parity.runners import KERNEL_NAMES, TFLiteRunner
    from edgekit.parity.tolerance import Tolerance
    from edgekit.tflite_model import TFLiteModel, quantize_input

    load_backends()
    model = build_model(tf, size, alpha, seed=7)
    if args.smoke:
        model = first_blocks(tf, model, SMOKE_LAST_LAYER)
    keras_path = work / "mobilenetv2.keras"
    model.save(keras_path)
    rng = np.random.default_rng(11)
    calib = rng.uniform(-1, 1, (n_calib, size, size, 3)).astype(np.float32)
    held = rng.uniform(-1, 1, (n_eval, size, size, 3)).astype(np.float32)
    np.save(work / "calib.npy", calib)
    np.save(work / "eval.npy", held)
    logits = model.predict(held[:4], verbose=0)
    extent = f" up to {SMOKE_LAST_LAYER} (smoke)" if args.smoke else ""
    print(f"model: MobileNetV2 {size}x{size} alpha {alpha}{extent}, {model.count_params():,} params; float logits std "
          f"{float(logits.std()):.3g} (not collapsed: > 0)")

    def bare():
        def representative_dataset():
            for i in range(len(calib)):
                yield [calib[i:i + 1]]

        with captured_output():
            converter = tf.lite.TFLiteConverter.from_keras_model(tf.keras.models.load_model(keras_path))
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            converter.representative_dataset = representative_dataset
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            converter.inference_input_type = tf.int8
            converter.inference_output_type = tf.int8
            data = converter.convert()
        (work / "bare_int8.tflite").write_bytes(data)

    _, t_bare1 = timed(bare)
    options = eq.QuantizeOptions(eval_data=work / "eval.npy", tolerance=Tolerance())
    result, t_edgekit = timed(lambda: eq.quantize(str(keras_path), work / "calib.npy", work / "out", options))
    t_bare2 = timed(bare)[1] if not args.smoke else t_bare1  # a second bare run brackets edgekit's (load drifts)
    t_bare = (t_bare1 + t_bare2) / 2
    out = result.parity.outputs[0].metrics()
    print(f"quantize: bare converter {t_bare1:.2f} s / {t_bare2:.2f} s (mean {t_bare:.2f} s); edgekit quantize "
          f"{t_edgekit:.2f} s (first run, fresh statistics cache, parity on {n_eval} samples included) "
          f"-> ratio {t_edgekit / t_bare:.2f}x (target <= 1.3x)")
    print(f"parity of that run: cosine {out['cosine']:.4f}, SQNR {out['sqnr_db']:.1f} dB, top-1 "
          f"{out.get('top1_agreement', float('nan')):.3f}; kernels: {result.parity.candidate.kernels}")

    float_model = TFLiteModel.load(work / "out" / "model_float.tflite")
    int8_model = TFLiteModel.load(work / "out" / result.main_file)
    samples = [[held[i:i + 1]] for i in range(n_eval)]
    ref, cand = TFLiteRunner(float_model), TFLiteRunner(int8_model)
    compare(ref, cand, samples[:2], tolerance=Tolerance())  # warm both interpreters

    def bare_loop():
        for model_, kind in ((float_model, "plain"), (int8_model, "plain")):
            interp = model_.interpreter(kind)
            info_in, info_out = model_.inputs[0], model_.outputs[0]
            for s in samples:
                interp.set_tensor(info_in.index, quantize_input(s[0], info_in))
                interp.invoke()
                interp.get_tensor(info_out.index).copy()

    reps = 3
    t_loop = min(timed(bare_loop)[1] for _ in range(reps))
    t_parity = min(timed(lambda: compare(ref, cand, samples, tolerance=Tolerance()))[1] for _ in range(reps))
    print(f"parity throughput: edgekit compare {n_eval / t_parity:.1f} samples/s vs bare LiteRT loop "
          f"{n_eval / t_loop:.1f} samples/s -> ratio {t_parity / t_loop:.2f}x (target <= 1.2x; best of {reps}; "
          f"both on {KERNEL_NAMES['optimized']})")

    per_kind = {}
    for label, m in (("float", float_model), ("int8", int8_model)):
        for kind in ("reference", "plain"):
            interp = m.interpreter(kind)
            info = m.inputs[0]
            x = quantize_input(samples[0][0], info)
            interp.set_tensor(info.index, x)
            interp.invoke()
            n = 3 if kind == "reference" else 10
            t0 = time.perf_counter()
            for _ in range(n):
                interp.set_tensor(info.index, x)
                interp.invoke()
            per_kind[f"{label}_{kind}"] = (time.perf_counter() - t0) / n * 1e3
    print(f"ms per inference: float BUILTIN_REF {per_kind['float_reference']:.1f} vs optimized "
          f"{per_kind['float_plain']:.1f}; int8 BUILTIN_REF {per_kind['int8_reference']:.1f} vs optimized "
          f"{per_kind['int8_plain']:.1f}")
    figures = {"size": size, "alpha": alpha, "layers": len(model.layers), "calib": n_calib, "eval": n_eval, "bare_s": [t_bare1, t_bare2],
               "edgekit_s": t_edgekit, "quantize_ratio": t_edgekit / t_bare, "parity_s": t_parity, "bare_loop_s": t_loop,
               "parity_ratio": t_parity / t_loop, "ms_per_inference": per_kind, "cosine": out["cosine"]}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
