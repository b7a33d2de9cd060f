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
import shutil
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
    """Memory of the local Ray session's processes (this driver's descendants: GCS, raylet, Ray's agents, the
    workers; not other Ray sessions on the machine, not the driver itself), sampled every 0.5 s.

    Peaks of the summed RSS, PSS and USS, of the largest map-actor USS, and of the object store's used bytes.
    Summed RSS counts every shared page once per process that touched it (the shared libraries, about 80 MiB
    of file pages per Ray worker, and the plasma store mapped into every worker): it grows with the number of
    Ray processes alive, not with the data. PSS splits shared pages between their processes (the sum is the
    machine's real use); USS counts only pages private to a process.
    """

    FIELDS = ("rss", "pss", "uss")

    def __init__(self, period_s: float = 0.5) -> None:
        import psutil

        self.psutil = psutil
        self.period_s = period_s
        self.peak = {f: 0 for f in self.FIELDS}
        self.peak_actor_uss = 0
        self.peak_store = 0
        self.peak_driver = 0
        self.processes = 0
        self.samples = 0
        self.loads: list = []
        self._store = self._store_reader()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _store_reader():
        """Bytes used in the object store (the raylet's store stats, what `ray memory --stats-only` prints)."""
        import ray
        from ray._private.internal_api import get_memory_info_reply, get_state_from_address

        state = get_state_from_address(ray.get_runtime_context().gcs_address)
        return lambda: get_memory_info_reply(state).store_stats.object_store_bytes_used

    def _run(self) -> None:
        me = self.psutil.Process()
        while not self._stop.is_set():
            self.peak_driver = max(self.peak_driver, me.memory_info().rss)
            total, count = {f: 0 for f in self.FIELDS}, 0
            for p in me.children(recursive=True):
                try:
                    name, m = p.name(), p.memory_full_info()
                except (self.psutil.NoSuchProcess, self.psutil.AccessDenied, ProcessLookupError):
                    continue
                count += 1
                for f in self.FIELDS:
                    total[f] += getattr(m, f)
                if "MapWorker" in name:
                    self.peak_actor_uss = max(self.peak_actor_uss, m.uss)
            for f in self.FIELDS:
                self.peak[f] = max(self.peak[f], total[f])
            self.processes = max(self.processes, count)
            try:
                self.peak_store = max(self.peak_store, self._store())
            except Exception:  # the raylet is going away at the end of a run
                pass
            self.samples += 1
            self.loads.append(os.getloadavg()[0])
            self._stop.wait(self.period_s)

    def __enter__(self) -> "RayMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def mib(self) -> dict:
        out = {f"peak_{f}_ray_mib": round(self.peak[f] / 2**20, 1) for f in self.FIELDS}
        out.update(peak_map_actor_uss_mib=round(self.peak_actor_uss / 2**20, 1),
                   peak_object_store_mib=round(self.peak_store / 2**20, 3), ray_processes=self.processes,
                   peak_driver_rss_mib=round(self.peak_driver / 2**20, 1),
                   load_average=round(sum(self.loads) / len(self.loads), 1) if self.loads else None)
        return out

    def line(self) -> str:
        m = self.mib()
        return (f"peak RSS of Ray processes {m['peak_rss_ray_mib']:.0f} MiB, PSS {m['peak_pss_ray_mib']:.0f} MiB, "
                f"USS {m['peak_uss_ray_mib']:.0f} MiB ({self.processes} processes), map actor USS "
                f"{m['peak_map_actor_uss_mib']:.0f} MiB, object store {m['peak_object_store_mib']:.2f} MiB; driver RSS "
                f"{m['peak_driver_rss_mib']:.0f} MiB")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (seconds): checks the script runs")
    ap.add_argument("--small", type=int, default=50_000)
    ap.add_argument("--large", type=int, default=200_000)
    ap.add_argument("--digits", type=int, default=100_000, help="augmented digits for the demo model (0: skip)")
    ap.add_argument("--chunk", type=int, default=2048)
    ap.add_argument("--digits-only", action="store_true", help="only the digits runs (1 and 2 workers)")
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
    from edgekit.scale.ray_start import start_local_ray

    ref, cand = mlperf / "kws_ref_model_float32.tflite", mlperf / "kws_ref_model_int8.tflite"
    inputs = open_runner(ref).input_specs()
    work = Path(tempfile.mkdtemp(prefix="edgekit-bench-ray-"))
    try:
        t0 = time.perf_counter()
        if not args.digits_only:
            write_shards(work / "small", small, seed=1)
            write_shards(work / "large", large, seed=1)
        if n_digits:
            write_digit_shards(work / "digits", n_digits, seed=2)
            digits_float, digits_int8 = digits_models(work)
        kws_data = "" if args.digits_only else f"{small:,} and {large:,} generated KWS inputs, "
        print(f"data: {kws_data}{n_digits:,} augmented digits, as .npy shards of "
              f"{SHARD:,} rows ({time.perf_counter() - t0:.1f} s); chunk {chunk} samples per Ray task; {os.cpu_count()} CPUs")
        runs = {}
        # the memory pair first, then the digits, the 1-worker KWS run last (a full run cut short keeps the first ones)
        kws = [] if args.digits_only else [("small", "small", 2, ref, cand), ("large", "large", 2, ref, cand)]
        plan = kws + ([("digits", "digits", 2, digits_float, digits_int8), ("digits", "digits", 1, digits_float, digits_int8)]
                      if n_digits else []) + ([("small", "small", 1, ref, cand)] if kws else [])
        for label, folder, workers, reference, candidate in plan:
            source = list_source(work / folder, open_runner(reference).input_specs(), chunk=chunk)
            # a fresh local Ray per run, as `edgekit parity --ray` starts one: every run starts from the same processes
            # (in one session, the actors a finished run leaves behind count in the next run's peak); --smoke keeps one
            # session for all runs (its memory figures mean nothing, and each start costs 10-60 s on a loaded machine)
            if not ray.is_initialized():
                # 8 attempts: on a machine at load 30+ the raylet sometimes gives up waiting for its agents
                start_local_ray(ray, num_cpus=2, attempts=8, include_dashboard=False, log_to_driver=False,
                                configure_logging=False)
            try:
                with RayMemory() as mem:
                    # both models are classifiers (the digits CNN outputs logits, which parity would otherwise
                    # judge as a regression output): top-1 agreement is the figure
                    kinds = tuple((n, "class_scores") for n in open_runner(candidate).output_names())
                    report = ray_parity(reference, candidate, source, settings=RaySettings(workers=workers),
                                        tolerance=Tolerance(output_kinds=kinds))
            finally:
                if not args.smoke:
                    ray.shutdown()
            e = report.data["execution"]
            out = report.outputs[0].metrics()
            memory = mem.mib()
            runs[(label, workers)] = (e, out, memory)
            print(f"{label:6s} {source.samples:>8,} samples, {workers} worker(s): {e['samples_per_s']:>9.1f} samples/s, "
                  f"wall {e['wall_time_s']:.1f} s (mean load average {memory['load_average']}); cosine {out['cosine']:.6f} "
                  f"SQNR {out['sqnr_db']:.2f} dB top-1 {out['top1_agreement']:.4f}; {mem.line()}", flush=True)
            _write_json(args, runs, None, None)
        same, efficiency = True, None
        if kws:
            one, two = runs[("small", 1)], runs[("small", 2)]
            efficiency = two[0]["samples_per_s"] / (2 * one[0]["samples_per_s"])
            same = _same(one[1], two[1])
            print(f"scaling 1 -> 2 workers: {two[0]['samples_per_s'] / one[0]['samples_per_s']:.2f}x throughput, "
                  f"efficiency {efficiency:.0%} (2 CPUs shared with the driver and Ray's own processes)")
        if n_digits:
            d1, d2 = runs[("digits", 1)], runs[("digits", 2)]
            same = same and _same(d1[1], d2[1])
            print(f"digits 1 -> 2 workers: {d2[0]['samples_per_s'] / d1[0]['samples_per_s']:.2f}x throughput, efficiency "
                  f"{d2[0]['samples_per_s'] / (2 * d1[0]['samples_per_s']):.0%}")
        print(f"metrics identical across worker counts (floats within 1e-9 relative): {same}")
        if kws:
            _print_memory(runs[("small", 2)][2], runs[("large", 2)][2], small, large)
        _write_json(args, runs, efficiency, same)
        return 0 if same else 1
    finally:
        ray.shutdown()
        shutil.rmtree(work, ignore_errors=True)  # the shards: 400 MB at 200,000 samples


def _same(a: dict, b: dict) -> bool:
    return all(a[k] == b[k] or abs(a[k] - b[k]) <= 1e-9 * abs(a[k]) for k in a if k != "name")


def _print_memory(m_small: dict, m_large: dict, small: int, large: int) -> None:
    for key, what in (("peak_rss_ray_mib", "peak RSS"), ("peak_pss_ray_mib", "peak PSS"), ("peak_uss_ray_mib", "peak USS"),
                      ("peak_map_actor_uss_mib", "peak USS of one map actor"),
                      ("peak_driver_rss_mib", "peak RSS of this driver (it also ran the digits quantization)")):
        print(f"{what}{'' if 'actor' in key or 'driver' in key else ' of Ray processes'}: {m_small[key]:.0f} MiB at "
              f"{small:,} samples vs {m_large[key]:.0f} MiB at {large:,} samples (2 workers): "
              f"{m_large[key] / m_small[key] - 1:+.1%}")
    print(f"object store peak: {m_small['peak_object_store_mib']:.2f} MiB at {small:,} vs "
          f"{m_large['peak_object_store_mib']:.2f} MiB at {large:,} samples")


def _write_json(args, runs: dict, efficiency, same) -> None:
    """The figures so far (after every run, so a run cut short still leaves what it measured)."""
    if args.json:
        rows = [{"dataset": label, "model": "digits demo CNN" if label == "digits" else "KWS", "workers": workers,
                 "samples_per_s": e["samples_per_s"], "wall_time_s": e["wall_time_s"], "samples": e["samples"],
                 "cosine": out["cosine"], "sqnr_db": out["sqnr_db"], **memory}
                for (label, workers), (e, out, memory) in runs.items()]
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"smoke": args.smoke, "scaling_efficiency": efficiency,
                                         "metrics_identical": same, "rows": rows}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
