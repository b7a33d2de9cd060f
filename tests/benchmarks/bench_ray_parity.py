#!/usr/bin/env python
"""Dataset-scale parity on Ray Data: KWS int8 vs float (MLPerf Tiny) on generated inputs written as .npy
shards, 1 vs 2 workers on this machine, and peak memory at a small vs a large dataset; then the demo digits
model (float vs its edgekit int8) on augmented digits, 1 vs 2 workers.

Prints, per run: samples/s, wall time, scaling efficiency (2-worker throughput / (2 x 1-worker)), the
metrics (they must be identical across worker counts), and peak RSS of the driver and of all Ray
processes (sampled every 0.2 s): memory must stay flat as the dataset grows.

Inputs: 1,000 KWS MFCC-like inputs from tests/benchmarks/_generated_inputs.py (seeded), augmented with
seeded noise and gain to the requested count. They are stand-ins, not Speech Commands: parity on them is
agreement on plausible inputs, accuracy is not measured.

The digits are the 400 committed held-out digits (calibration_data/digits/eval, through their spec),
augmented with seeded gain, offset and noise, clipped to the spec's 0..1 range.

    .venv/bin/python tests/benchmarks/bench_ray_parity.py [--smoke] [--small 50000] [--large 200000] [--digits 100000]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import numpy as np  # noqa: E402

from _generated_inputs import find_mlperf_dir, kws_inputs  # noqa: E402

SHARD = 10_000


def write_shards(folder: Path, n: int, seed: int) -> None:
    """n augmented KWS inputs as .npy shards of SHARD rows (written shard by shard: flat memory here too)."""
    folder.mkdir(parents=True, exist_ok=True)
    base = kws_inputs(min(n, 1000), seed)
    rng = np.random.default_rng(seed)
    for start in range(0, n, SHARD):
        rows = min(SHARD, n - start)
        pick = base[rng.integers(0, len(base), rows)]
        gain = rng.uniform(0.8, 1.2, (rows,) + (1,) * (pick.ndim - 1)).astype(np.float32)
        noise = rng.normal(0, 1.0, pick.shape).astype(np.float32)
        np.save(folder / f"shard_{start // SHARD:04d}.npy", (pick * gain + noise).astype(np.float32))


def write_digit_shards(folder: Path, n: int, seed: int) -> None:
    """n augmented held-out digits (float, through the committed spec) as .npy shards of SHARD rows."""
    from edgekit.calibration.dataset import ImageFolderSource
    from edgekit.preprocessing.spec import find_spec

    root = Path(__file__).resolve().parents[2] / "calibration_data" / "digits" / "eval"
    src = ImageFolderSource(root, find_spec(root))
    base = np.concatenate([src.load(i)[0] for i in range(len(src))]).astype(np.float32)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for start in range(0, n, SHARD):
        rows = min(SHARD, n - start)
        pick = base[rng.integers(0, len(base), rows)]
        shape = (rows,) + (1,) * (pick.ndim - 1)
        out = pick * rng.uniform(0.8, 1.2, shape) + rng.uniform(-0.1, 0.1, shape) + rng.normal(0, 0.05, pick.shape)
        np.save(folder / f"shard_{start // SHARD:04d}.npy", np.clip(out, 0.0, 1.0).astype(np.float32))


def digits_models(work: Path):
    """(float .tflite, int8 .tflite) of the demo digits model: edgekit quantize on the committed calibration digits."""
    from edgekit.quantize import QuantizeOptions, quantize

    repo = Path(__file__).resolve().parents[2]
    out = work / "digits-int8"
    result = quantize(str(repo / "edgekit" / "demo" / "digits_cnn.pt2"), repo / "calibration_data" / "digits" / "calib", out,
                      QuantizeOptions(eval_data=repo / "calibration_data" / "digits" / "eval"))
    return out / "model_float.tflite", out / result.main_file


class RayMemory:
    """Peak summed RSS of the processes of the local Ray session (raylet, GCS, workers), sampled."""

    def __init__(self) -> None:
        import psutil

        self.psutil = psutil
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = self.psutil.Process()
        while not self._stop.is_set():
            total = 0
            for p in self.psutil.process_iter(["name", "cmdline"]):
                try:
                    cmd = " ".join(p.info["cmdline"] or [])
                    if p.pid != me.pid and ("ray::" in cmd or "raylet" in cmd or "gcs_server" in cmd or "ray/_private" in cmd
                                            or (p.info["name"] or "").startswith("ray::")):
                        total += p.memory_info().rss
                except (self.psutil.NoSuchProcess, self.psutil.AccessDenied):
                    continue
            self.peak = max(self.peak, total)
            self._stop.wait(0.2)

    def __enter__(self) -> "RayMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (seconds): checks the script runs")
    ap.add_argument("--small", type=int, default=50_000)
    ap.add_argument("--large", type=int, default=200_000)
    ap.add_argument("--digits", type=int, default=100_000, help="augmented digits for the demo model (0: skip)")
    ap.add_argument("--chunk", type=int, default=2048)
    ap.add_argument("--json", type=Path, help="also write the figures as JSON here (run_all.py turns them into its summary)")
    args = ap.parse_args(argv)
    small, large, chunk = (args.small, args.large, args.chunk) if not args.smoke else (60, 120, 32)
    n_digits = args.digits if not args.smoke else 60
    mlperf = find_mlperf_dir()
    if mlperf is None:
        print("SKIPPED: MLPerf Tiny models not found")
        return 0
    import ray

    from edgekit.parity.runners import open_runner
    from edgekit.parity.tolerance import Tolerance
    from edgekit.scale.ray_parity import RaySettings, ray_parity
    from edgekit.scale.sources import list_source

    ref, cand = mlperf / "kws_ref_model_float32.tflite", mlperf / "kws_ref_model_int8.tflite"
    inputs = open_runner(ref).input_specs()
    work = Path(tempfile.mkdtemp(prefix="edgekit-bench-ray-"))
    t0 = time.perf_counter()
    write_shards(work / "small", small, seed=1)
    write_shards(work / "large", large, seed=1)
    if n_digits:
        write_digit_shards(work / "digits", n_digits, seed=2)
        digits_float, digits_int8 = digits_models(work)
    print(f"data: {small:,} and {large:,} generated KWS inputs, {n_digits:,} augmented digits, as .npy shards of "
          f"{SHARD:,} rows ({time.perf_counter() - t0:.1f} s); chunk {chunk} samples per Ray task; {os.cpu_count()} CPUs")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    runs = {}
    try:
        plan = [("small", "small", 1, ref, cand), ("small", "small", 2, ref, cand), ("large", "large", 2, ref, cand)]
        if n_digits:
            plan += [("digits", "digits", 1, digits_float, digits_int8), ("digits", "digits", 2, digits_float, digits_int8)]
        for label, folder, workers, reference, candidate in plan:
            source = list_source(work / folder, open_runner(reference).input_specs(), chunk=chunk)
            with RayMemory() as mem:
                report = ray_parity(reference, candidate, source, settings=RaySettings(workers=workers), tolerance=Tolerance())
            e = report.data["execution"]
            out = report.outputs[0].metrics()
            runs[(label, workers)] = (e, out, mem.peak)
            print(f"{label:6s} {source.samples:>8,} samples, {workers} worker(s): {e['samples_per_s']:>9.1f} samples/s, "
                  f"wall {e['wall_time_s']:.1f} s; cosine {out['cosine']:.6f} SQNR {out['sqnr_db']:.2f} dB "
                  f"top-1 {out['top1_agreement']:.4f}; peak RSS of Ray processes {mem.peak / 2**20:.0f} MiB")
    finally:
        ray.shutdown()
    one, two = runs[("small", 1)], runs[("small", 2)]
    efficiency = two[0]["samples_per_s"] / (2 * one[0]["samples_per_s"])
    same = all(one[1][k] == two[1][k] or abs(one[1][k] - two[1][k]) <= 1e-9 * abs(one[1][k]) for k in one[1] if k != "name")
    print(f"scaling 1 -> 2 workers: {two[0]['samples_per_s'] / one[0]['samples_per_s']:.2f}x throughput, "
          f"efficiency {efficiency:.0%} (2 CPUs shared with the driver and Ray's own processes)")
    if n_digits:
        d1, d2 = runs[("digits", 1)], runs[("digits", 2)]
        same = same and all(d1[1][k] == d2[1][k] or abs(d1[1][k] - d2[1][k]) <= 1e-9 * abs(d1[1][k])
                            for k in d1[1] if k != "name")
        print(f"digits 1 -> 2 workers: {d2[0]['samples_per_s'] / d1[0]['samples_per_s']:.2f}x throughput, efficiency "
              f"{d2[0]['samples_per_s'] / (2 * d1[0]['samples_per_s']):.0%}")
    print(f"metrics identical across worker counts (floats within 1e-9 relative): {same}")
    print(f"peak RSS of Ray processes: {runs[('small', 2)][2] / 2**20:.0f} MiB at {small:,} samples vs "
          f"{runs[('large', 2)][2] / 2**20:.0f} MiB at {large:,} samples (2 workers); driver peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    if args.json:
        rows = [{"dataset": label, "model": "digits demo CNN" if label == "digits" else "KWS", "workers": workers, "samples_per_s": e["samples_per_s"], "wall_time_s": e["wall_time_s"],
                 "samples": e["samples"], "cosine": out["cosine"], "sqnr_db": out["sqnr_db"],
                 "peak_rss_ray_mib": round(peak / 2**20, 1)} for (label, workers), (e, out, peak) in runs.items()]
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"smoke": args.smoke, "scaling_efficiency": efficiency,
                                         "metrics_identical": same, "rows": rows}, indent=2))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
