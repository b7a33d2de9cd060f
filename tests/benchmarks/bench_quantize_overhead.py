#!/usr/bin/env python
"""Overhead of `edgekit quantize` over the bare TensorFlow converter route, on the MLPerf Tiny
KWS float SavedModel, in ONE process:

  bare    tf.lite.TFLiteConverter.from_saved_model(...) + representative_dataset over the same
          calibration samples, optimizations=[DEFAULT], TFLITE_BUILTINS_INT8, int8 in/out, write file
  edgekit edgekit.quantize.quantize(SavedModel, calib.npy, --eval-data eval.npy, method=minmax)
          with a FRESH statistics cache dir (export + statistics + int8 + parity + outputs)
  cached  the same edgekit call with --method percentile on the same data and cache dir: the
          activation statistics must come from the cache

    .venv/bin/python tests/benchmarks/bench_quantize_overhead.py [--reps 3] [--json out.json]

`import tensorflow` (and importing edgekit) is timed separately and EXCLUDED from both sides.
One untimed-for-the-ratio warm-up of each route runs first (first calls in a process load MLIR
passes, LiteRT kernels etc.); its times are printed as "cold". Then --reps repetitions alternate
which route runs first. Inputs are generated (no real data ships): see _generated_inputs.py.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from _figures import FigureLog, bench_options  # noqa: E402
from _generated_inputs import CacheHits, find_mlperf_dir, kws_inputs  # noqa: E402

CALIB_SEED, EVAL_SEED = 301, 302


class StageTimer:
    """Accumulates wall time per stage of wrapped callables; nested calls get 'parent > child'."""

    installed: list = []  # (owner, attr, original) of every wrapper, for unwrap_all()

    @classmethod
    def unwrap_all(cls) -> None:
        """Put every wrapped callable back (main() may run inside another process: the smoke test's)."""
        while cls.installed:
            owner, attr, original = cls.installed.pop()
            if original is None:  # inherited: the wrapper shadowed the base class's
                delattr(owner, attr)
            else:
                setattr(owner, attr, original)

    @classmethod
    def remember(cls, owner, attr: str) -> None:
        """Record what owner.attr is before a wrapper replaces it (a class's own entry, so classmethods survive)."""
        cls.installed.append((owner, attr, owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr)))

    def __init__(self) -> None:
        self.enabled = False
        self.stack: list[str] = []
        self.times: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def reset(self) -> None:
        self.times.clear()
        self.calls.clear()
        self.stack.clear()

    @contextlib.contextmanager
    def stage(self, label: str):
        if not self.enabled:
            yield
            return
        full = f"{self.stack[-1]} > {label}" if self.stack else label
        self.stack.append(full)
        self.times[full] += 0.0  # keep stages in the order they start
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.times[full] += time.perf_counter() - t0
            self.calls[full] += 1
            self.stack.pop()

    def wrap(self, owner, attr: str, label, *, method: bool = False) -> None:
        """Replace owner.attr by a timed wrapper; label may be a function of the call args."""
        StageTimer.remember(owner, attr)
        original = getattr(owner, attr)

        @functools.wraps(original)
        def timed(*args, **kwargs):
            name = label(*args, **kwargs) if callable(label) else label
            with self.stage(name):
                return original(*args, **kwargs)

        setattr(owner, attr, timed)

    def wrap_contextmanager(self, owner, attr: str, label: str) -> None:
        StageTimer.remember(owner, attr)
        original = getattr(owner, attr)

        @contextlib.contextmanager
        def timed(*args, **kwargs):
            with self.stage(label), original(*args, **kwargs) as value:
                yield value

        setattr(owner, attr, timed)




def main(argv=None) -> int:
    """run() with every timing wrapper removed afterwards (tests/test_benchmarks_smoke.py calls it in-process)."""
    try:
        return run(argv)
    finally:
        StageTimer.unwrap_all()


def run(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3, help="timed repetitions after the warm-up (default 3)")
    ap.add_argument("--calib", type=int, default=200, help="generated calibration samples (default 200)")
    ap.add_argument("--eval", type=int, default=50, help="generated held-out samples for edgekit's parity (default 50)")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
    ap.add_argument("--keep", action="store_true", help="keep the generated data and outputs (temp dir)")
    bench_options(ap)
    args = ap.parse_args(argv)
    if args.smoke:
        args.reps, args.calib, args.eval = 1, 12, 8
    figures = FigureLog("bench_quantize_overhead", smoke=args.smoke, argv=argv)

    mlperf = find_mlperf_dir()
    if mlperf is None:
        print("SKIPPED: MLPerf Tiny models not found (set EDGEKIT_MLPERF_DIR or restore tests/fixtures/mlperf_tiny)")
        return 0
    saved_model = mlperf / "kws_ref_model_savedmodel"
    t_script = time.perf_counter()

    # --- imports, timed separately and excluded from both sides -------------------------------
    from edgekit.quiet import captured_output  # tiny, no TF

    t0 = time.perf_counter()
    with captured_output((2,)):  # TF 2.21 prints a oneDNN banner on fd 2 despite TF_CPP_MIN_LOG_LEVEL=3
        import tensorflow as tf
    t_import_tf = time.perf_counter() - t0
    t0 = time.perf_counter()
    import edgekit.quantize as eq
    from edgekit.calibration import dataset as eds
    from edgekit.converters import load_backends
    from edgekit.parity.compare import compare
    from edgekit.parity.runners import TFLiteRunner
    from edgekit.parity.tolerance import Tolerance
    from edgekit.provenance import tool_versions
    from edgekit.tflite_model import TFLiteModel, _interpreter_module

    load_backends()
    import edgekit.converters.tflite as ect

    _interpreter_module()  # ai_edge_litert
    from tensorflow.lite.python import lite as tflite_lite
    from tensorflow.lite.python.optimize import calibrator as tf_calibrator

    t_import_edgekit = time.perf_counter() - t0

    # --- data ----------------------------------------------------------------------------------
    work = Path(tempfile.mkdtemp(prefix="edgekit-bench-overhead-"))
    calib = kws_inputs(args.calib, CALIB_SEED)
    held = kws_inputs(args.eval, EVAL_SEED)
    calib_path, eval_path = work / "calib.npy", work / "eval.npy"
    np.save(calib_path, calib)
    np.save(eval_path, held)

    # --- instrumentation (wrappers installed from outside; the library is not modified) --------
    timer = StageTimer()
    timer.wrap(eq, "load_backends", "load backends")
    timer.wrap(ect, "to_float_tflite", "export (SavedModel -> float .tflite)")
    timer.wrap(tf.lite.TFLiteConverter, "from_saved_model", "TFLiteConverter.from_saved_model")
    timer.wrap(tflite_lite.TFLiteSavedModelConverterV2, "convert", "TFLiteConverter.convert (float)")
    timer.wrap(ect, "TFLiteModel", lambda data, source="": "int8 model load (LiteRT)" if "int8" in source
               else "float model load (LiteRT)")
    timer.wrap(eds, "open_source", "data: open")
    timer.wrap(eds.CalibrationSet, "samples", "data: load + validate")

    timer.wrap(ect.TFLiteInt8Converter, "check_support", "op support check")
    timer.wrap(ect, "collect_statistics", "statistics (2 passes, or cache)")
    timer.wrap(ect, "cache_key", "data: fingerprint + cache key")
    timer.wrap(ect, "choose_ranges", "choose ranges")
    timer.wrap(ect.TFLiteInt8Converter, "convert", "int8 conversion")
    timer.wrap(ect, "calibrated_flatbuffer", "write ranges into flatbuffer")
    timer.wrap(ect, "quantize_calibrated", "mlir_quantize")
    timer.wrap(ect, "inspect_int8", "inspect int8 result")
    timer.wrap(eq, "compare", "parity (float vs int8, BUILTIN_REF)")
    timer.wrap_contextmanager(eq, "atomic_output_dir", "write outputs (files, report.md, manifest)")
    timer.wrap(eq, "write_quantize_report", "report.md")

    # the same kind of breakdown for the bare route (TF internals called by convert())
    bare_timer = StageTimer()
    bare_timer.wrap(tf_calibrator.Calibrator, "calibrate", "TF calibrator (run float model on samples)")
    bare_timer.wrap(tflite_lite, "_mlir_quantize", "mlir_quantize")

    hits = CacheHits()
    stats_log = logging.getLogger("edgekit.calibration.statistics")
    stats_log.addHandler(hits)
    stats_log.setLevel(logging.INFO)
    stats_log.propagate = False

    def bare(out: Path) -> dict:
        bare_timer.reset()
        bare_timer.enabled = True
        t0 = time.perf_counter()

        def representative_dataset():
            for i in range(len(calib)):
                yield [calib[i:i + 1]]

        t_load0 = time.perf_counter()
        with captured_output():
            converter = tf.lite.TFLiteConverter.from_saved_model(str(saved_model))
        t_load = time.perf_counter() - t_load0
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative_dataset
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
        t_conv0 = time.perf_counter()
        with captured_output():
            model = converter.convert()
        t_conv = time.perf_counter() - t_conv0
        out.write_bytes(model)
        total = time.perf_counter() - t0
        bare_timer.enabled = False
        stages = {"from_saved_model": t_load, "convert() total": t_conv}
        stages.update({f"convert() > {k}": v for k, v in bare_timer.times.items()})
        stages["convert() > float conversion + rest"] = t_conv - sum(bare_timer.times.values())
        stages["write file + other"] = total - t_load - t_conv
        return {"seconds": total, "stages": stages, "path": str(out)}

    def edgekit(method: str, outdir: Path, cache: Path) -> dict:
        os.environ["EDGEKIT_CACHE_DIR"] = str(cache)
        timer.reset()
        timer.enabled = True
        before = hits.hits
        t0 = time.perf_counter()
        result = eq.quantize(str(saved_model), calib_path, outdir, eq.QuantizeOptions(method=method, eval_data=eval_path))
        total = time.perf_counter() - t0
        timer.enabled = False
        stages = dict(timer.times)
        stages["other (not wrapped)"] = total - sum(v for k, v in timer.times.items() if " > " not in k)
        return {"seconds": total, "stages": stages, "stats_cached": hits.hits > before, "passed": result.parity.passed,
                "path": str(outdir / "model_int8.tflite")}

    # --- cold runs (first calls in this process; --smoke: none, the timed rep is the cold one) ------
    if args.smoke:
        cold_bare = cold_edgekit = {"seconds": float("nan")}
    else:
        cold_bare = bare(work / "cold_bare.tflite")
        cold_edgekit = edgekit("minmax", work / "cold_edgekit", work / "cache_cold")

    # --- timed repetitions ---------------------------------------------------------------------
    runs = {"bare": [], "edgekit": [], "edgekit_cached": []}
    for rep in range(args.reps):
        cache = work / f"cache_{rep}"  # fresh, empty statistics cache for the minmax run
        order = ("bare", "edgekit") if rep % 2 == 0 else ("edgekit", "bare")
        for who in order:
            if who == "bare":
                runs["bare"].append(bare(work / f"bare_{rep}.tflite"))
            else:
                runs["edgekit"].append(edgekit("minmax", work / f"edgekit_{rep}_minmax", cache))
        runs["edgekit_cached"].append(edgekit("percentile", work / f"edgekit_{rep}_percentile", cache))

    med = {k: statistics.median(r["seconds"] for r in v) for k, v in runs.items()}

    def median_stages(rs):
        keys = list(dict.fromkeys(k for r in rs for k in r["stages"]))
        return {k: statistics.median(r["stages"].get(k, 0.0) for r in rs) for k in keys}

    st = {k: median_stages(v) for k, v in runs.items()}
    parity_key = "parity (float vs int8, BUILTIN_REF)"
    write_key = "write outputs (files, report.md, manifest)"
    like_for_like = statistics.median(
        r["seconds"] - r["stages"].get(parity_key, 0.0) - r["stages"].get(write_key, 0.0) for r in runs["edgekit"])

    # --- sanity: what each route produced -------------------------------------------------------
    float_ref = TFLiteModel(ect.to_float_tflite(str(saved_model)).tflite, source="exported float")
    samples = [[held[i:i + 1]] for i in range(len(held))]
    produced = {}
    for name, path in (("bare converter", runs["bare"][-1]["path"]), ("edgekit minmax", runs["edgekit"][-1]["path"]),
                       ("edgekit percentile (cached)", runs["edgekit_cached"][-1]["path"])):
        m = TFLiteModel.load(Path(path))
        rep = compare(TFLiteRunner(float_ref), TFLiteRunner(m), samples, tolerance=Tolerance())
        o = rep.outputs[0].metrics()
        i_ = m.inputs[0]
        produced[name] = {"size_bytes": Path(path).stat().st_size, "cosine": o["cosine"], "sqnr_db": o["sqnr_db"],
                          "top1_agreement": o.get("top1_agreement"), "ops": len(m.ops),
                          "input_scale": i_.scale, "input_zero_point": i_.zero_point}
    same_bytes = Path(runs["bare"][-1]["path"]).read_bytes() == Path(runs["edgekit"][-1]["path"]).read_bytes()
    tensor_diff = _tensor_differences(Path(runs["bare"][-1]["path"]), Path(runs["edgekit"][-1]["path"]))

    # --- print ----------------------------------------------------------------------------------
    print("=" * 96)
    print("edgekit quantize overhead vs the bare TFLiteConverter route — MLPerf Tiny KWS float SavedModel")
    print(f"model: {saved_model}")
    print(f"DATA: GENERATED, not real (no Speech Commands here): {args.calib} MFCC-like calibration samples (seed {CALIB_SEED})")
    print(f"      for BOTH routes; edgekit also gets {args.eval} generated held-out samples (seed {EVAL_SEED}) for its parity stage.")
    print(f"IMPORTS (excluded from both sides): import tensorflow {t_import_tf:.2f} s; edgekit + ai_edge_litert {t_import_edgekit:.2f} s")
    print(f"COLD first calls in process (excluded from the ratio): bare {cold_bare['seconds']:.2f} s, then edgekit "
          f"{cold_edgekit['seconds']:.2f} s (edgekit ran second, after TF's converter was warm)")
    print(f"TIMED: {args.reps} repetitions, order alternating (bare first on even reps); wall time, perf_counter; 2-core host")
    print("=" * 96)
    print("\nTABLE 1 — wall time per run (s)")
    head = ["route", *[f"rep {i}" for i in range(args.reps)], "median", "ratio vs bare (median)"]
    rows = [
        ["bare TFLiteConverter (load + int8 convert + write)", *[f"{r['seconds']:.2f}" for r in runs["bare"]], f"{med['bare']:.2f}", "1.00x"],
        ["edgekit quantize minmax, fresh stats cache", *[f"{r['seconds']:.2f}" for r in runs["edgekit"]], f"{med['edgekit']:.2f}",
         f"{med['edgekit'] / med['bare']:.2f}x"],
        ["  same, minus its parity + output-writing stages", *["" for _ in runs["edgekit"]], f"{like_for_like:.2f}",
         f"{like_for_like / med['bare']:.2f}x"],
        ["edgekit quantize percentile, stats from cache", *[f"{r['seconds']:.2f}" for r in runs["edgekit_cached"]],
         f"{med['edgekit_cached']:.2f}", f"{med['edgekit_cached'] / med['bare']:.2f}x"],
    ]
    _table(head, rows)
    cached_ok = all(r["stats_cached"] for r in runs["edgekit_cached"]) and not any(r["stats_cached"] for r in runs["edgekit"])
    print(f"statistics cache: minmax runs hit the cache {sum(r['stats_cached'] for r in runs['edgekit'])}/{args.reps} times "
          f"(expected 0), percentile runs {sum(r['stats_cached'] for r in runs['edgekit_cached'])}/{args.reps} (expected "
          f"{args.reps}) -> {'OK' if cached_ok else 'UNEXPECTED'}; "
          f"second run is {med['edgekit'] / med['edgekit_cached']:.2f}x faster than the first")
    print(f"edgekit parity gate (cosine>=0.98, top-1>=0.95 on generated data): minmax "
          f"{'pass' if all(r['passed'] for r in runs['edgekit']) else 'FAIL'}, percentile "
          f"{'pass' if all(r['passed'] for r in runs['edgekit_cached']) else 'FAIL'}")

    print("\nTABLE 2 — edgekit stage breakdown, median over reps (s); measured by timing edgekit.quantize's callees")
    print("          from outside (wrapped module attributes); '>' marks a stage nested in the one before it")
    keys = list(dict.fromkeys([*st["edgekit"], *st["edgekit_cached"]]))
    keys = [k for k in keys if k != "other (not wrapped)"] + ["other (not wrapped)"]
    _table(["stage", "minmax (fresh cache)", "% of run", "percentile (cached)", "% of run"],
           [[("    " * k.count(" > ")) + k.split(" > ")[-1], f"{st['edgekit'].get(k, 0):.3f}",
             f"{100 * st['edgekit'].get(k, 0) / med['edgekit']:.1f}", f"{st['edgekit_cached'].get(k, 0):.3f}",
             f"{100 * st['edgekit_cached'].get(k, 0) / med['edgekit_cached']:.1f}"] for k in keys])

    print("\nTABLE 3 — bare route breakdown, median over reps (s); TF internals timed by wrapping Calibrator.calibrate and")
    print("          lite._mlir_quantize")
    _table(["stage", "seconds", "% of run"],
           [[k, f"{v:.3f}", f"{100 * v / med['bare']:.1f}"] for k, v in st["bare"].items()])

    print(f"\nTABLE 4 — what each route produced (last rep); parity vs the float model exported from the SavedModel,"
          f" {args.eval} generated held-out samples, BUILTIN_REF")
    _table(["route", "size B", "ops", "input scale / zp", "cosine", "SQNR dB", "top-1 agr"],
           [[k, f"{v['size_bytes']:,}", str(v["ops"]), f"{v['input_scale']:.5f} / {v['input_zero_point']}",
             f"{v['cosine']:.5f}", f"{v['sqnr_db']:.2f}", f"{v['top1_agreement']:.4f}"] for k, v in produced.items()])
    print(f"bare vs edgekit-minmax int8: byte-identical files {same_bytes}; tensors {tensor_diff['tensors']} vs "
          f"{tensor_diff['tensors_other']}, of them {tensor_diff['differing']} differ in quantization params or constant "
          f"data; metadata bare {tensor_diff['metadata']} vs edgekit {tensor_diff['metadata_other']}")
    total = time.perf_counter() - t_script
    print(f"\nscript wall time {total:.1f} s (including imports and data generation); "
          + (f"outputs kept in {work}" if args.keep else "temp outputs removed (--keep keeps them)"))

    source = (f"MLPerf Tiny KWS float SavedModel, {args.calib} generated calibration + {args.eval} held-out samples, "
              f"median of {args.reps} rep(s), wall time (perf_counter), this host")
    figures.note("inputs are GENERATED (no Speech Commands here): parity figures are agreement on synthetic inputs")
    for key, label in (("bare", "bare TFLiteConverter int8 route"), ("edgekit", "edgekit quantize minmax (fresh cache)"),
                       ("edgekit_cached", "edgekit quantize percentile (statistics cached)")):
        figures.add(f"wall time: {label}", round(med[key], 3), "s", source=source)
    figures.add("edgekit / bare wall time", round(med["edgekit"] / med["bare"], 3), "x", source=source)
    figures.add("edgekit without parity+write / bare", round(like_for_like / med["bare"], 3), "x", source=source)
    figures.add("cached statistics hit as expected", cached_ok, "", method="count", source="edgekit statistics cache log")
    for name, v in produced.items():
        figures.add(f"SQNR of {name} vs float", round(v["sqnr_db"], 2), "dB",
                    source=f"edgekit.parity.compare (BUILTIN_REF) on {args.eval} generated held-out samples")
        figures.add(f"size of {name}", v["size_bytes"], "B", method="count", source="file size")
    figures.add("import tensorflow", round(t_import_tf, 2), "s", source="perf_counter around the import")
    figures.write(args.figures)

    if args.json:
        from edgekit.report import json_safe

        data = {"model": str(saved_model), "calib_samples": args.calib, "eval_samples": args.eval, "reps": args.reps,
                "data": "generated, not real", "import_tensorflow_s": t_import_tf, "import_edgekit_s": t_import_edgekit,
                "cold": {"bare": cold_bare, "edgekit": cold_edgekit}, "runs": runs, "median_s": med,
                "ratio_edgekit_vs_bare": med["edgekit"] / med["bare"],
                "ratio_edgekit_without_parity_and_write_vs_bare": like_for_like / med["bare"],
                "ratio_cached_vs_bare": med["edgekit_cached"] / med["bare"], "median_stages_s": st,
                "produced": produced, "bare_equals_edgekit_bytes": same_bytes, "bare_vs_edgekit_tensors": tensor_diff, "tools": tool_versions(),
                "script_seconds": total}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(json_safe(data), indent=2) + "\n")
        print(f"wrote {args.json}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _tensor_differences(a_path: Path, b_path: Path) -> dict:
    """Tensors (matched by name) whose quantization params or constant buffers differ."""
    from tensorflow.lite.tools import flatbuffer_utils as fb

    def describe(path):
        model = fb.read_model(str(path))
        out = {}
        for t in model.subgraphs[0].tensors:
            q = t.quantization
            scale = tuple(float(v) for v in q.scale) if q is not None and q.scale is not None else ()
            zp = tuple(int(v) for v in q.zeroPoint) if q is not None and q.zeroPoint is not None else ()
            data = model.buffers[t.buffer].data
            out[t.name] = (int(t.type), scale, zp, bytes(data) if data is not None else b"")
        meta = {(m.name.decode() if isinstance(m.name, bytes) else str(m.name)):
                len(model.buffers[m.buffer].data if model.buffers[m.buffer].data is not None else b"")
                for m in (model.metadata or [])}
        return out, meta

    a, meta_a = describe(a_path)
    b, meta_b = describe(b_path)
    differing = sum(1 for n in set(a) | set(b) if a.get(n) != b.get(n))
    return {"tensors": len(a), "tensors_other": len(b), "differing": differing,
            "metadata": meta_a, "metadata_other": meta_b}


def _table(headers, rows) -> None:
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, r in enumerate(cells):
        print(" | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if n == 0:
            print("-+-".join("-" * w for w in widths))


if __name__ == "__main__":
    sys.exit(main())
