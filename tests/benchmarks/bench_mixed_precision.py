#!/usr/bin/env python
"""Mixed precision on the MLPerf Tiny float models: all-int8 vs whole-model 16x8 vs --fallback auto.

For KWS, IC and AD (float .tflite): generate calibration (200) and held-out (100) inputs (no real data
ships; see _generated_inputs.py), then run `edgekit.quantize.quantize` three times:
  int8   all int8 (the baseline SQNR on the held-out inputs)
  16x8   --activations int16 (int16 activations, int8 weights)
  auto   --fallback auto --min-sqnr-db <int8 SQNR + 3 dB>: the most damaged layers go to float
and print SQNR, size, the layers kept in float, the MACs moved to float and the host latency each step
measured (LiteRT BUILTIN kernels, 1 thread; a host figure, not a microcontroller one).

    .venv/bin/python tests/benchmarks/bench_mixed_precision.py [kws ic ad] [--json out.json]

Models are read from $EDGEKIT_MLPERF_DIR or tests/fixtures/mlperf_tiny; the script exits 0 with a
"skipped" message if they are absent. Nothing touches the network.
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
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

from _figures import FigureLog, bench_options  # noqa: E402
from _generated_inputs import TASKS, find_mlperf_dir  # noqa: E402

FLOAT_MODELS = {"kws": "kws_ref_model_float32.tflite", "ic": "ic_resnet8_float32.tflite", "ad": "ad_autoencoder_float32.tflite"}
CALIB_SEED, EVAL_SEED = 11, 22


def run_one(model: Path, calib: Path, eval_data: Path, outdir: Path, **options) -> dict:
    from edgekit.quantize import QuantizeOptions, quantize

    start = time.perf_counter()
    result = quantize(str(model), calib, outdir, QuantizeOptions(eval_data=eval_data, **options))
    parity = json.loads((outdir / "parity.json").read_text())
    output = result.parity.outputs[0].metrics()
    row = {"file": result.main_file, "size_bytes": (outdir / result.main_file).stat().st_size,
           "passed": result.parity.passed, "sqnr_db": output["sqnr_db"], "cosine": output["cosine"],
           "seconds": time.perf_counter() - start}
    fallback = (parity.get("data") or {}).get("quantization", {}).get("fallback")
    if fallback:
        row["fallback"] = {"stopped": fallback["stopped"], "chosen": fallback["chosen"], "total_macs": fallback["total_macs"],
                           "steps": [{"step": s["step"], "kept": s["kept"], "sqnr_db": s["outputs"][0]["sqnr_db"],
                                      "size_bytes": s["size_bytes"], "float_macs": s["float_macs"],
                                      "host_latency_ms": s["host_latency_ms"]} for s in fallback["steps"]]}
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="*", metavar="TASK", help="kws, ic, ad (default: all)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    bench_options(parser)
    args = parser.parse_args()
    log = FigureLog("bench_mixed_precision", smoke=args.smoke)
    n_calib, n_eval = (16, 8) if args.smoke else (200, 100)
    if args.smoke and not args.tasks:
        args.tasks = ["ad"]  # the smallest model: every precision path in seconds
    unknown = sorted(set(args.tasks) - set(FLOAT_MODELS))
    if unknown:
        parser.error(f"unknown task(s) {unknown}; choose from {sorted(FLOAT_MODELS)}")
    args.tasks = args.tasks or list(FLOAT_MODELS)
    folder = find_mlperf_dir()
    if folder is None:
        print("skipped: MLPerf Tiny models not found (set EDGEKIT_MLPERF_DIR or restore tests/fixtures/mlperf_tiny)")
        return 0
    from edgekit.parity.tolerance import Tolerance

    figures = {}
    with tempfile.TemporaryDirectory(prefix="bench-mixed-") as work:
        work = Path(work)
        for task in args.tasks:
            generator = TASKS[task].generator
            calib, eval_data = work / f"{task}_calib.npy", work / f"{task}_eval.npy"
            np.save(calib, generator(n_calib, CALIB_SEED))
            np.save(eval_data, generator(n_eval, EVAL_SEED))
            model = folder / FLOAT_MODELS[task]
            no_threshold = Tolerance(min_cosine=0.0)
            rows = {"int8": run_one(model, calib, eval_data, work / f"{task}_int8", tolerance=no_threshold)}
            rows["16x8"] = run_one(model, calib, eval_data, work / f"{task}_16x8", activations="int16", tolerance=no_threshold)
            target = round(rows["int8"]["sqnr_db"] + 3.0, 1)
            rows["auto"] = run_one(model, calib, eval_data, work / f"{task}_auto", fallback="auto",
                                   tolerance=Tolerance(min_sqnr_db=target))
            rows["auto"]["target_sqnr_db"] = target
            figures[task] = rows
            for name, row in rows.items():
                src = (f"MLPerf Tiny {task} float .tflite, edgekit.quantize {name}, {n_calib} generated calibration / "
                       f"{n_eval} held-out samples, SQNR vs float")
                log.add(f"{task} {name}: SQNR", row["sqnr_db"], "dB", source=src)
                log.add(f"{task} {name}: size", row["size_bytes"], "B", method="count", source="file size")
                log.add(f"{task} {name}: quantize wall time", round(row["seconds"], 2), "s", source="perf_counter, this host")
                print(f"{task:3s} {name:5s} SQNR {row['sqnr_db']:6.2f} dB  size {row['size_bytes']:>8,} B  "
                      f"{'passed' if row['passed'] else 'FAILED'}  ({row['seconds']:.1f} s)", flush=True)
            fb = rows["auto"].get("fallback")
            if fb:
                print(f"    target {target} dB; stopped: {fb['stopped']}; last kept step: {fb['chosen']}")
                for s in fb["steps"]:
                    print(f"    {'kept    ' if s['kept'] else 'reverted'} {s['step'][:70]:70s} SQNR {s['sqnr_db']:6.2f}  "
                          f"{s['size_bytes']:>8,} B  float MACs {s['float_macs']:,}/{fb['total_macs']:,}  "
                          f"host {s['host_latency_ms']:.4f} ms (measured, LiteRT BUILTIN, 1 thread)")
    log.note("inputs are GENERATED (see _generated_inputs.py); SQNR is agreement with the float model on them")
    log.write(args.figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
