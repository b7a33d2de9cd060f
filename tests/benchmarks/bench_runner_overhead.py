#!/usr/bin/env python
"""The device runner's own overhead per inference on the host, against a bare LiteRT loop, in ONE run.

  bare    this process: Interpreter(model, num_threads=1) (default resolver, XNNPACK), then N times
          set_tensor(input) + invoke(); wall time / N
  runner  edgekit's HostRunner: the same model, inputs, resolver and thread count in the runner child
          process (timing each invoke, batching results to the host as JSON lines); its warm-phase
          wall time / N (what `throughput_ips` in run.json is the inverse of)

overhead per inference = runner wall/N - bare wall/N, shown next to the model's own p50 latency. On a
busy machine wall/N mostly measures other processes; the median time between one invoke's end and the
next one's start ("gap": input copy + the loop's own work, preemptions excluded by the median) is the
robust figure: gap overhead = runner gap - bare gap.
Each model is measured --reps times, alternating which side goes first; medians are printed. Cold
start of the runner child (a fresh process, as a deployed app starts) is shown too: runtime import,
model load (interpreter creation + allocate_tensors), first inference, and the whole run's wall time
(process start, imports, load, first pass, N iterations, result transfer).

    .venv/bin/python tests/benchmarks/bench_runner_overhead.py [--seconds 1.5 | -n N] [--reps 3] [--models kws ic ad]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from _figures import FigureLog, bench_options  # noqa: E402

MLPERF = Path(os.environ.get("EDGEKIT_MLPERF_DIR", REPO / "tests" / "fixtures" / "mlperf_tiny"))
MODELS = {"kws": "kws_ref_model_int8.tflite", "ic": "ic_resnet8_int8.tflite", "ad": "ad_autoencoder_int8.tflite"}


def bare(model: Path, samples, n: int):
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=str(model), num_threads=1)
    interp.allocate_tensors()
    index = interp.get_input_details()[0]["index"]
    arrays = [next(iter(s.values())) for s in samples]
    for k in range(10):  # same warm-up as the runner's default 5 + first pass
        interp.set_tensor(index, arrays[k % len(arrays)])
        interp.invoke()
    starts, ends = np.empty(n), np.empty(n)
    start = time.perf_counter()
    for k in range(n):
        interp.set_tensor(index, arrays[k % len(arrays)])
        starts[k] = time.perf_counter()
        interp.invoke()
        ends[k] = time.perf_counter()
    wall = time.perf_counter() - start
    return {"wall_per_inf_ms": wall / n * 1e3, "p50_ms": float(np.median(ends - starts)) * 1e3,
            "gap_us": float(np.median(starts[1:] - ends[:-1])) * 1e6}


def runner(model: Path, samples, n: int):
    from edgekit.run.base import DeviceTarget, RunRequest
    from edgekit.run.runners.host import HostRunner

    request = RunRequest(artifact=model, inputs=samples, iterations=n, warmup=5, timeout_s=60, options={"threads": 1})
    start = time.perf_counter()
    result = HostRunner(DeviceTarget("host", "", {}, "host")).run(request)
    total = time.perf_counter() - start
    starts, lat = np.asarray(result.timestamps_s), np.asarray(result.latencies_ms) / 1e3
    return {"wall_per_inf_ms": result.extra["warm_wall_s"] / n * 1e3, "p50_ms": float(np.median(result.latencies_ms)),
            "gap_us": float(np.median(starts[1:] - (starts[:-1] + lat[:-1]))) * 1e6,
            "import_ms": result.extra["runtime_import_ms"], "load_ms": result.load_ms,
            "first_ms": result.first_inference_ms, "total_s": total}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, help="warm iterations per measurement (default: about --seconds of work)")
    parser.add_argument("--seconds", type=float, default=1.5, help="length of each measurement when -n is not given")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    bench_options(parser)
    args = parser.parse_args()
    if args.smoke:
        args.n, args.reps, args.models = 200, 1, ["ad"]
    log = FigureLog("bench_runner_overhead", smoke=args.smoke)
    if not MLPERF.is_dir():
        print(f"MLPerf Tiny models not found at {MLPERF}", file=sys.stderr)
        return 2
    from edgekit.run.inputs import model_inputs, random_inputs

    print(f"runner overhead per inference, host, LiteRT default resolver, 1 thread, medians of {args.reps} reps")
    print(f"{'model':<6}{'N':>8}{'p50 invoke':>12}{'bare wall/N':>13}{'runner wall/N':>15}{'overhead/inf':>14}{'% of p50':>10}"
          f"{'bare gap':>10}{'runner gap':>12}{'gap overhead':>14}{'% of p50':>10}"
          f"{'import':>9}{'load':>9}{'first':>9}{'run total':>11}")
    for key in args.models:
        model = MLPERF / MODELS[key]
        samples = random_inputs(model_inputs(model))
        n = args.n or max(1000, int(args.seconds / (bare(model, samples, 2000)["p50_ms"] / 1e3)))
        src = f"MLPerf Tiny {key} int8, LiteRT default resolver, 1 thread, {n} warm iterations, median of {args.reps} reps"
        b, r = [], []
        for rep in range(args.reps):
            order = (("bare", bare), ("runner", runner)) if rep % 2 == 0 else (("runner", runner), ("bare", bare))
            for name, fn in order:
                (b if name == "bare" else r).append(fn(model, samples, n))
        med = lambda rows, k: statistics.median(x[k] for x in rows)  # noqa: E731
        overhead_us = (med(r, "wall_per_inf_ms") - med(b, "wall_per_inf_ms")) * 1e3
        p50 = med(b, "p50_ms")
        print(f"{key:<6}{n:>8}{p50 * 1e3:>10.1f}us{med(b, 'wall_per_inf_ms') * 1e3:>11.1f}us{med(r, 'wall_per_inf_ms') * 1e3:>13.1f}us"
              f"{overhead_us:>12.2f}us{overhead_us / (p50 * 1e3) * 100:>9.1f}%"
              f"{med(b, 'gap_us'):>8.2f}us{med(r, 'gap_us'):>10.2f}us{med(r, 'gap_us') - med(b, 'gap_us'):>12.2f}us"
              f"{(med(r, 'gap_us') - med(b, 'gap_us')) / (p50 * 1e3) * 100:>9.1f}%"
              f"{med(r, 'import_ms'):>7.1f}ms{med(r, 'load_ms'):>7.1f}ms{med(r, 'first_ms'):>7.2f}ms{med(r, 'total_s'):>10.2f}s")
        log.add(f"{key}: p50 invoke", round(p50 * 1e3, 2), "us", source=src + ", bare loop in this process")
        log.add(f"{key}: runner overhead per inference (wall/N)", round(overhead_us, 2), "us", source=src)
        log.add(f"{key}: runner gap overhead", round(med(r, "gap_us") - med(b, "gap_us"), 2), "us", source=src)
        log.add(f"{key}: runner cold start (import + load + first)",
                round(med(r, "import_ms") + med(r, "load_ms") + med(r, "first_ms"), 1), "ms", source=src)
    log.write(args.figures)
    print("overhead/inf: extra wall time per inference of the runner loop (timing + batching + JSON lines to the host);"
          " import/load/first/run total: the runner child's cold start and the whole run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
