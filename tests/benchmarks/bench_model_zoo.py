"""Real models from public Python packages on the board (issue 25): for each model of the zoo (tests/zoo.py,
fixtures in tests/fixtures/zoo/) print its ops, the ops the edgekit runtime lacks, and — for the models it runs —
RAM (arena + state) vs the tflite-micro python runtime's smallest working arena, flash, instructions per inference
(measured: QEMU mps2-an386 + the ekcount plugin) and bit-exactness vs LiteRT BUILTIN_REF.

Calibration data are generated (seeded uniform over each model's input range), so the parity vs float printed
here says nothing about accuracy on real images; bit-exactness and the memory and instruction figures do not
depend on it.

    python tests/benchmarks/bench_model_zoo.py [--only NAME ...]
    python tests/benchmarks/bench_model_zoo.py --smoke   # the same pipeline on a small float16-weight Keras model
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _figures import FigureLog, bench_options  # noqa: E402
from tests.zoo import MODELS, RAM_TARGET, ZooModel, ZooResult, missing_ops, op_counts, run_model  # noqa: E402

QEMU_SOURCE = "QEMU mps2-an386 (Cortex-M4F), ekcount TCG plugin, `edgekit run`"


def smoke_model(folder: Path) -> ZooModel:
    """A small Keras CNN converted with float16 weights (DEQUANTIZE per weight, as MediaPipe stores them)."""
    import tensorflow as tf

    tf.keras.utils.set_random_seed(0)
    inp = tf.keras.Input((16, 16, 3), batch_size=1)
    x = tf.keras.layers.Conv2D(8, 3, strides=2, activation="relu6")(inp)
    x = tf.keras.layers.DepthwiseConv2D(3, padding="same", activation="relu6")(x)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    out = tf.keras.layers.Dense(4, activation="softmax")(x)
    converter = tf.lite.TFLiteConverter.from_keras_model(tf.keras.Model(inp, out))
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_types = [tf.float16]
    path = folder / "smoke_fp16.tflite"
    path.write_bytes(converter.convert())
    return ZooModel("smoke", str(path), -1.0, 1.0)


def report(result: ZooResult, log: FigureLog) -> None:
    name = result.model.name
    ops = ", ".join(f"{k} {v}" for k, v in result.ops.items())
    print(f"\n{name} ({result.model.package}): {sum(result.ops.values())} ops: {ops}")
    if result.folded:
        print(f"  folded before calibration: {result.folded}")
    print(f"  ops the edgekit runtime lacks: {', '.join(result.missing_ops) or 'none'}")
    log.add(f"{name}: ops", sum(result.ops.values()), "ops", method="count", source=f"{result.model.path.name} graph")
    if result.error:
        print(f"  stops at: {result.error}")
        return
    src = f"{name} int8 from `edgekit quantize` on generated calibration data"
    print(f"  RAM (arena + state): {result.ram_bytes:,} B = {result.ram_ratio:.2f}x the TFLM python runtime's "
          f"smallest working arena {result.tflm_arena_bytes:,} B (measured: firmware.json / bisection on "
          f"tflite-micro; target <= {RAM_TARGET}x)")
    print(f"  flash: {result.flash_bytes:,} B (measured: linked ELF)")
    print(f"  instructions per inference: {result.instructions:,} ({result.instructions / max(result.macs, 1):.2f} "
          f"per MAC; measured: {QEMU_SOURCE})")
    print(f"  bit-exact vs LiteRT BUILTIN_REF: {result.bit_exact} ({result.differing_elements} differing elements); "
          f"vs TFLM python: {result.vs_tflm_python}")
    print(f"  parity vs float (cosine per output, generated data): "
          + ", ".join(f"{k} {v:.4f}" for k, v in result.parity.items()))
    log.add(f"{name}: RAM (arena + state)", result.ram_bytes, "B", source=f"firmware.json of {src}")
    log.add(f"{name}: TFLM python smallest working arena", result.tflm_arena_bytes, "B",
            source=f"tflite-micro python runtime, arena bisection (edgekit.firmware.tflm) on {src}")
    log.add(f"{name}: RAM / TFLM arena", round(result.ram_ratio, 4), "x", source="the two figures above")
    log.add(f"{name}: flash", result.flash_bytes, "B", source=f"linked ELF, {src}")
    log.add(f"{name}: instructions per inference", result.instructions, "instructions", source=QEMU_SOURCE)
    log.add(f"{name}: bit-exact vs LiteRT BUILTIN_REF", result.bit_exact, "", source=QEMU_SOURCE)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=None, help="model names (file stems) to run")
    parser.add_argument("--json", type=Path, default=None, help="write the per-model results as JSON here")
    bench_options(parser)
    args = parser.parse_args()
    log = FigureLog("bench_model_zoo", smoke=args.smoke)
    log.note("calibration data generated (seeded uniform over each model's input range); parity is not accuracy")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.smoke:
            print("zoo models (ops only in --smoke):")
            for model in MODELS:
                print(f"  {model.name}: {sum(op_counts(model.path.read_bytes()).values())} ops, edgekit lacks: "
                      f"{', '.join(missing_ops(model.path.read_bytes())) or 'none'}")
            chosen = [smoke_model(Path(tmp))]
        else:
            chosen = [m for m in MODELS if args.only is None or m.name in args.only]
        for model in chosen:
            result = run_model(model, Path(tmp) / model.name)
            report(result, log)
            results.append(result.to_json())
    if args.smoke and (not results or results[0]["error"] or not results[0]["bit_exact"]):
        print(f"smoke pipeline failed: {results[0]['error'] if results else 'no result'}")
        return 1
    if args.json:
        args.json.write_text(json.dumps({"rows": results}, indent=2, default=str) + "\n")
    log.write(args.figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
