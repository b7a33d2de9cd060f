#!/usr/bin/env python
"""`edgekit quantize --format onnx`: every engine x calibration method on real models, side by side.

For each model, runs edgekit.quantize.quantize with --engine ort (minmax, entropy, percentile) and
--engine nncf (minmax, mse) on the same calibration and held-out sets and prints: parity of the QDQ
model against the float ONNX model (SQNR, cosine, top-1 agreement, accuracy when labelled), how far
the activation scales move from onnxruntime's minmax (min / median / max ratio over the tensors both
quantize), and the wall time of the whole quantize call (export + calibration + quantization + parity).

Models: the demo digits CNN (real digit images), the same with two outlier images (values x25) added
to the calibration set (the case where the methods should differ), and tests.firmware.mobilenet_like
(seeded images). The MLPerf Tiny float models ship as .tflite/.h5/SavedModel; --format onnx takes
ONNX or PyTorch models (no tf2onnx here), so they are not part of this benchmark.

    .venv/bin/python tests/benchmarks/bench_onnx_methods.py [--json out.json] [--skip-mobilenet]
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _figures import FigureLog, bench_options  # noqa: E402

import numpy as np  # noqa: E402

RUNS = [("ort", "minmax"), ("ort", "entropy"), ("ort", "percentile"), ("nncf", "minmax"), ("nncf", "mse")]
SMOKE_RUNS = [("ort", "minmax")]  # one engine and method, on the digits case only


def digits_arrays():
    from edgekit.calibration.dataset import ImageFolderSource
    from edgekit.preprocessing.spec import find_spec

    folder = REPO / "calibration_data" / "digits" / "calib"
    source = ImageFolderSource(folder, find_spec(folder))
    return np.concatenate([source.load(i)[0] for i in range(len(source))])


def cases(work: Path, mobilenet: bool):
    demo = str(REPO / "edgekit" / "demo" / "digits_cnn.pt2")
    digits = REPO / "calibration_data" / "digits"
    yield "digits CNN", demo, digits / "calib", digits / "eval"
    calib = digits_arrays()
    spiked = calib.copy()
    spiked[[5, 100]] *= 25.0   # two calibration images with outlier intensities
    np.save(work / "digits_outliers.npy", spiked)
    yield "digits CNN, 2 outlier calib images", demo, work / "digits_outliers.npy", digits / "eval"
    if mobilenet:
        from tests.firmware.mobilenet_like import calibration_images

        np.save(work / "mn_calib.npy", calibration_images(100, seed=1))
        np.save(work / "mn_eval.npy", calibration_images(100, seed=2))
        yield "mobilenet_like (seeded images)", "tests.firmware.mobilenet_like:mobilenet_like", work / "mn_calib.npy", work / "mn_eval.npy"


def run_one(model: str, calib: Path, evaluation: Path, engine: str, method: str, out: Path) -> dict:
    from edgekit.calibration.ranges import RangeOptions
    from edgekit.parity.tolerance import Tolerance
    from edgekit.quantize import QuantizeOptions, quantize

    options = QuantizeOptions(method=method, range_options=RangeOptions(percentile=99.99), format="onnx", engine=engine,
                              eval_data=evaluation, tolerance=Tolerance())
    start = time.perf_counter()
    result = quantize(model, calib, out, options)
    seconds = time.perf_counter() - start
    parity = json.loads((out / "parity.json").read_text())
    (output,) = parity["outputs"]
    qdq = parity["data"]["quantization"]["qdq"]
    return {"engine": engine, "method": method, "seconds": seconds, "sqnr_db": output.get("sqnr_db"),
            "cosine": output.get("cosine"), "top1_agreement": output.get("top1_agreement"),
            "accuracy": (parity.get("accuracy") or {}).get("candidate_top1"),
            "reference_accuracy": (parity.get("accuracy") or {}).get("reference_top1"),
            "scales": {k: v["scale"] for k, v in qdq["activation_scales"].items()}, "passed": result.parity.passed}


def spread(base: dict, other: dict) -> str:
    ratios = np.array([other[t] / base[t] for t in other if t in base and base[t] > 0])
    if ratios.size == 0:
        return "no common tensors"
    differing = int(np.sum(np.abs(ratios - 1) > 1e-6))
    return f"{differing}/{ratios.size} differ, ratio min {ratios.min():.3f} median {np.median(ratios):.3f} max {ratios.max():.3f}"


def fmt(value, spec=".4f"):
    return "-" if value is None else format(value, spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write every figure here")
    parser.add_argument("--skip-mobilenet", action="store_true", help="only the digits cases (ORT entropy is slow on ~40 tensors)")
    bench_options(parser)
    args = parser.parse_args()
    log = FigureLog("bench_onnx_methods", smoke=args.smoke)
    runs = SMOKE_RUNS if args.smoke else RUNS
    logging.basicConfig(level=logging.ERROR)
    from edgekit.provenance import host_info, tool_versions

    results = []
    with tempfile.TemporaryDirectory(prefix="bench-onnx-") as work:
        work = Path(work)
        for label, model, calib, evaluation in cases(work, not args.skip_mobilenet):
            if args.smoke and results:
                break
            rows = []
            for engine, method in runs:
                row = run_one(model, calib, evaluation, engine, method, work / f"{len(results)}_{engine}_{method}")
                rows.append(row)
                print(f"  {label}: {engine}/{method} done in {row['seconds']:.1f} s", file=sys.stderr)
            base = rows[0]["scales"]
            print(f"\n### {label}\n")
            print("| engine | method | SQNR dB | cosine | top-1 agr. | accuracy (ref) | scales vs ort/minmax | time s |")
            print("|---|---|---|---|---|---|---|---|")
            for row in rows:
                accuracy = "-" if row["accuracy"] is None else f"{row['accuracy']:.4f} ({row['reference_accuracy']:.4f})"
                print(f"| {row['engine']} | {row['method']} | {fmt(row['sqnr_db'], '.2f')} | {fmt(row['cosine'])} | "
                      f"{fmt(row['top1_agreement'])} | {accuracy} | {spread(base, row['scales'])} | {row['seconds']:.1f} |")
            results.append({"case": label, "model": model, "runs": rows})
            for row in rows:
                src = f"edgekit quantize --format onnx --engine {row['engine']} --method {row['method']}, {label}"
                log.add(f"{label}: {row['engine']}/{row['method']} SQNR", row["sqnr_db"], "dB",
                        source=src + ", parity vs the float ONNX model on the held-out set")
                if row["accuracy"] is not None:
                    log.add(f"{label}: {row['engine']}/{row['method']} accuracy", row["accuracy"], "",
                            source=src + ", labelled held-out digits")
                log.add(f"{label}: {row['engine']}/{row['method']} quantize wall time", round(row["seconds"], 2), "s",
                        source="perf_counter around one quantize() call, this host")
    print(f"\nhost: {host_info().get('processor')} ({host_info().get('platform')}); tools: "
          + ", ".join(f"{k} {v}" for k, v in sorted(tool_versions(('onnxruntime', 'onnx', 'nncf', 'torch')).items())))
    log.write(args.figures)
    if args.json:
        args.json.write_text(json.dumps({"results": results, "host": host_info(),
                                         "tools": tool_versions(("onnxruntime", "onnx", "nncf", "torch"))}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
