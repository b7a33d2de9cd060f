#!/usr/bin/env python
"""edgekit quantize on the MLPerf Tiny float models vs the published MLPerf Tiny int8 models.

For KWS (SavedModel and float .tflite), IC (.h5 and float .tflite) and AD (.h5 and float .tflite):
generate plausible calibration and held-out inputs (no real data ships), run
`edgekit.quantize.quantize` with --method minmax and percentile, and compare the result with the
published int8 model in the same folder: file size, and parity of BOTH int8 models against the
published float .tflite on the same generated held-out inputs (edgekit.parity.compare with LiteRT
BUILTIN_REF kernels).

    .venv/bin/python tests/benchmarks/bench_mlperf_quantize.py [--json out.json]

Models are read from $EDGEKIT_MLPERF_DIR or tests/fixtures/mlperf_tiny (relative to the repo);
the script exits 0 with a "skipped" message if they are absent. Nothing touches the network.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from _figures import FigureLog, bench_options  # noqa: E402
from _generated_inputs import TASKS, CacheHits, find_mlperf_dir, float_range_of_int8_input  # noqa: E402

CALIB_SEED = {"kws": 101, "ic": 102, "ad": 103}
EVAL_SEED = {"kws": 201, "ic": 202, "ad": 203}

MODELS = {  # task -> (non-tflite float source, float .tflite, published int8 .tflite, label)
    "kws": ("kws_ref_model_savedmodel", "kws_ref_model_float32.tflite", "kws_ref_model_int8.tflite", "KWS DS-CNN"),
    "ic": ("ic_resnet8.h5", "ic_resnet8_float32.tflite", "ic_resnet8_int8.tflite", "IC ResNet-8"),
    "ad": ("ad_autoencoder.h5", "ad_autoencoder_float32.tflite", "ad_autoencoder_int8.tflite", "AD autoencoder"),
}




def fmt(v, spec: str = ".4f") -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return format(v, spec)


def print_table(headers, rows) -> None:
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, r in enumerate(cells):
        print(" | ".join(c.rjust(w) if n and i >= 3 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if n == 0:
            print("-+-".join("-" * w for w in widths))


def parity(reference, candidate, samples):
    """Metrics of the (single) output: edgekit.parity.compare, BUILTIN_REF kernels on both sides."""
    from edgekit.parity.compare import compare
    from edgekit.parity.runners import TFLiteRunner
    from edgekit.parity.tolerance import Tolerance

    report = compare(TFLiteRunner(reference, kernels="reference"), TFLiteRunner(candidate, kernels="reference"),
                     samples, tolerance=Tolerance())
    assert len(report.outputs) == 1, report.outputs
    o = report.outputs[0].metrics()
    return {k: o.get(k) for k in ("cosine", "sqnr_db", "top1_agreement", "rmse", "max_abs")}


def structure(path: Path) -> dict:
    """Operator types, and how the weights of ops with constant weights are quantized."""
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils as fb

    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    types = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    model = fb.read_model(str(path))
    sub = model.subgraphs[0]
    ops, per_channel, per_tensor, weight_types = [], 0, 0, set()
    for op in sub.operators:
        code = model.operatorCodes[op.opcodeIndex]
        ops.append(names.get(max(code.builtinCode, code.deprecatedBuiltinCode), "?"))
        if op.inputs is not None and len(op.inputs) > 1 and op.inputs[1] >= 0:
            w = sub.tensors[op.inputs[1]]
            buf = model.buffers[w.buffer]
            if buf.data is None or not len(buf.data) or len(w.shape) < 2:
                continue
            weight_types.add(types[w.type])
            n = len(w.quantization.scale) if w.quantization is not None and w.quantization.scale is not None else 0
            per_channel += n > 1
            per_tensor += n == 1
    return {"ops": ops, "weights_per_channel": per_channel, "weights_per_tensor": per_tensor,
            "weight_types": sorted(weight_types)}


def io_quant(model) -> str:
    i, o = model.inputs[0], model.outputs[0]
    return f"in {i.dtype} s={i.scale:.4g} zp={i.zero_point}; out s={o.scale:.4g} zp={o.zero_point}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path, help="also write all figures as JSON here")
    ap.add_argument("--calib", type=int, default=300, help="generated calibration samples per model (default 300)")
    ap.add_argument("--eval", type=int, default=300, help="generated held-out samples per model (default 300)")
    ap.add_argument("--methods", default="minmax,percentile", help="edgekit range methods (default minmax,percentile)")
    ap.add_argument("--tasks", default="kws,ic,ad")
    ap.add_argument("--keep", action="store_true", help="keep the generated data and edgekit outputs (temp dir)")
    bench_options(ap)
    args = ap.parse_args(argv)
    if args.smoke:  # one model with a dynamic batch (IC), both of its sources, one method, a few samples
        args.calib, args.eval, args.methods, args.tasks = 16, 8, "minmax", "ic"
    figures = FigureLog("bench_mlperf_quantize", smoke=args.smoke, argv=argv)

    mlperf = find_mlperf_dir()
    if mlperf is None:
        print("SKIPPED: MLPerf Tiny models not found (set EDGEKIT_MLPERF_DIR or restore tests/fixtures/mlperf_tiny)")
        return 0

    t_start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="edgekit-bench-mlperf-"))
    os.environ["EDGEKIT_CACHE_DIR"] = str(work / "cache")  # fresh statistics cache for this run
    hits = CacheHits()
    stats_log = logging.getLogger("edgekit.calibration.statistics")
    stats_log.addHandler(hits)
    stats_log.setLevel(logging.INFO)
    stats_log.propagate = False  # absl (imported by TF) puts a handler on the root logger

    from edgekit.quiet import captured_output

    t0 = time.perf_counter()
    with captured_output((2,)):  # TF prints a oneDNN banner to fd 2 even with TF_CPP_MIN_LOG_LEVEL=3
        import tensorflow  # noqa: F401
    tf_import = time.perf_counter() - t0
    from edgekit.provenance import tool_versions
    from edgekit.quantize import QuantizeOptions, quantize
    from edgekit.tflite_model import TFLiteModel

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    print("=" * 100)
    print("edgekit quantize vs published MLPerf Tiny int8 models")
    print(f"models: {mlperf}")
    print("DATA: NO REAL DATA SHIPS with these models (Speech Commands, CIFAR-10, ToyADMOS unreachable).")
    print("      All calibration and held-out inputs below are GENERATED (fixed seeds); parity on them is")
    print("      agreement on plausible synthetic inputs, not accuracy. Class predictions on them mean nothing.")
    print(f"      {args.calib} calibration + {args.eval} disjoint held-out samples per model.")
    print("PARITY: edgekit.parity.compare, reference = the published float .tflite, LiteRT BUILTIN_REF kernels,")
    print("      metrics over all held-out samples of the single output (cosine, SQNR dB, top-1 agreement).")
    print("TIME: wall time of one edgekit.quantize.quantize() call (export + statistics + int8 + its own parity")
    print(f"      on the held-out set + writing outputs); TensorFlow already imported; stats cache fresh at {work / 'cache'}.")
    print(f"      (import tensorflow took {tf_import:.1f} s before any timing, excluded)")
    print("=" * 100)

    results = {"meta": {"mlperf_dir": str(mlperf), "calib_samples": args.calib, "eval_samples": args.eval,
                        "methods": methods, "calib_seeds": CALIB_SEED, "eval_seeds": EVAL_SEED,
                        "data": "generated, not real", "tensorflow_import_seconds": tf_import, "tools": tool_versions(), "python": platform.python_version()},
               "tasks": {}}
    rows = []
    for task in [t.strip() for t in args.tasks.split(",") if t.strip()]:
        source_name, float_name, pub_name, label = MODELS[task]
        gen = TASKS[task]
        float_model = TFLiteModel.load(mlperf / float_name)
        published = TFLiteModel.load(mlperf / pub_name)
        calib = gen.generator(args.calib, CALIB_SEED[task])
        held = gen.generator(args.eval, EVAL_SEED[task])
        calib_path, eval_path = work / f"{task}_calib.npy", work / f"{task}_eval.npy"
        np.save(calib_path, calib)
        np.save(eval_path, held)
        samples = [[held[i:i + 1]] for i in range(len(held))]

        pin = published.inputs[0]
        lo, hi = float_range_of_int8_input(pin.scale, pin.zero_point)
        outside = float(np.mean((held < lo) | (held > hi)))
        float_top1 = np.array([float_model.run(s, kind="reference")[0].argmax() for s in samples])
        classes = np.bincount(float_top1, minlength=float_model.outputs[0].shape[-1])
        task_info = {
            "data": gen.description,
            "calib_range": [float(calib.min()), float(calib.max())],
            "eval_range": [float(held.min()), float(held.max())],
            "published_int8_input_range": [lo, hi],
            "eval_fraction_outside_published_input_range": outside,
            "float_top1_class_counts": classes.tolist(),
            "rows": [],
        }
        print(f"\n## {label} ({task}) — data: {gen.description}")
        print(f"   generated calib range [{calib.min():.2f}, {calib.max():.2f}], held-out [{held.min():.2f}, {held.max():.2f}];"
              f" published int8 input (s={pin.scale:.4f}, zp={pin.zero_point}) covers [{lo:.2f}, {hi:.2f}];"
              f" {100 * outside:.3f} % of held-out values fall outside it")
        if float_model.outputs[0].shape[-1] <= 100 and task != "ad":
            print(f"   float model top-1 on held-out inputs, count per class: {classes.tolist()}"
                  f" ({int((classes > 0).sum())} of {len(classes)} classes predicted)")

        t0 = time.perf_counter()
        pub = parity(float_model, published, samples)
        t_pub = time.perf_counter() - t0
        row = {"task": task, "model": pub_name, "producer": "published (MLPerf Tiny)", "method": "-",
               "seconds": None, "size_bytes": (mlperf / pub_name).stat().st_size, "io": io_quant(published),
               "stats_cached": None, "edgekit_gate": None, **pub, **structure(mlperf / pub_name)}
        task_info["float_structure"] = structure(mlperf / float_name)
        task_info["rows"].append(row)
        rows.append(row)
        fs = task_info["float_structure"]
        print(f"   published float .tflite weight types: {fs['weight_types']}"
              + ("  <- NOT all-float: int8 weights (hybrid / dynamic-range model)" if fs["weight_types"] != ["FLOAT32"] else ""))
        print(f"   published int8: {io_quant(published)}  (parity {t_pub:.1f} s)")

        # smoke: the published float .tflite only (its dynamic batch against edgekit's batch-1 int8 is the parity case)
        for source in ((float_name,) if args.smoke else (source_name, float_name)):
            for method in methods:
                outdir = work / f"{task}_{Path(source).stem}_{method}"
                before = hits.hits
                t0 = time.perf_counter()
                try:
                    res = quantize(str(mlperf / source), calib_path, outdir,
                                   QuantizeOptions(method=method, eval_data=eval_path))
                except Exception as exc:  # report, keep going
                    dt = time.perf_counter() - t0
                    print(f"   edgekit {source} --method {method}: FAILED after {dt:.1f} s: {type(exc).__name__}: {exc}")
                    row = {"task": task, "model": source, "producer": "edgekit", "method": method, "seconds": dt,
                           "error": f"{type(exc).__name__}: {exc}"}
                    task_info["rows"].append(row)
                    rows.append(row)
                    continue
                dt = time.perf_counter() - t0
                int8 = TFLiteModel.load(outdir / "model_int8.tflite")
                metrics = parity(float_model, int8, samples)
                row = {"task": task, "model": source, "producer": "edgekit", "method": method, "seconds": dt,
                       "size_bytes": (outdir / "model_int8.tflite").stat().st_size, "io": io_quant(int8),
                       "stats_cached": hits.hits > before, "edgekit_gate": res.parity.passed,
                       "edgekit_gate_failures": res.parity.failures, **metrics,
                       **structure(outdir / "model_int8.tflite"),
                       "vs_own_float": {k: res.parity.outputs[0].metrics().get(k) for k in ("cosine", "sqnr_db", "top1_agreement")}}
                if source != float_name:  # the exported float reference vs the published float .tflite
                    exported = TFLiteModel.load(outdir / "model_float.tflite")
                    check = parity(float_model, exported, samples)
                    row["export_check"] = {"cosine": check["cosine"], "sqnr_db": check["sqnr_db"],
                                           "max_abs": check["max_abs"],
                                           "size_bytes": (outdir / "model_float.tflite").stat().st_size}
                task_info["rows"].append(row)
                rows.append(row)
                print(f"   edgekit {source} --method {method}: {dt:.1f} s; {row['io']}"
                      + (f"; exported float vs published float: cosine {check['cosine']:.6f}, SQNR {fmt(check['sqnr_db'], '.1f')} dB"
                         if "export_check" in row else ""))
        results["tasks"][task] = task_info

    print("\nTABLE — int8 models vs the published float .tflite on the same generated held-out inputs")
    print("  size = .tflite file bytes; cosine/SQNR/top-1 = edgekit.parity.compare (BUILTIN_REF) over all held-out samples;")
    print("  edgekit s = wall time of one quantize() call; cached = statistics came from edgekit's cache;")
    print("  gate = edgekit's own parity gate (cosine >= 0.98, top-1 >= 0.95) vs its exported float model")
    print("  ops = operator count (+ types the published int8 model does not use); w pc/pt = weighted ops with")
    print("  per-channel / per-tensor weight scales; 'own' = edgekit's parity.json, reference = the float model")
    print("  edgekit exported from THAT source (the KWS SavedModel, and slightly the AD .h5, are not the same model as")
    print("  their float .tflite: see the 'exported float vs published float' lines above)")
    headers = ["task", "int8 model (producer / source)", "method", "size B", "ops", "w pc/pt", "cosine", "SQNR dB",
               "top-1 agr", "own cos", "own SQNR", "own top-1", "edgekit s", "cached", "gate"]
    published_ops = {r["task"]: set(r["ops"]) for r in rows if r["producer"].startswith("published")}
    table = []
    for r in rows:
        if "error" in r:
            table.append([r["task"], f"edgekit / {r['model']}", r["method"], "FAILED"] + ["-"] * 8
                         + [fmt(r["seconds"], ".1f"), "-", "-"])
            continue
        who = "published" if r["producer"].startswith("published") else f"edgekit / {r['model']}"
        extra = sorted(set(r["ops"]) - published_ops[r["task"]])
        own = r.get("vs_own_float", {})
        table.append([r["task"], who, r["method"], f"{r['size_bytes']:,}",
                      f"{len(r['ops'])}" + (f" (+{','.join(extra)})" if extra else ""),
                      f"{r['weights_per_channel']}/{r['weights_per_tensor']}",
                      fmt(r["cosine"], ".5f"), fmt(r["sqnr_db"], ".2f"), fmt(r["top1_agreement"], ".4f"),
                      fmt(own.get("cosine"), ".5f"), fmt(own.get("sqnr_db"), ".2f"), fmt(own.get("top1_agreement"), ".4f"),
                      fmt(r["seconds"], ".1f"),
                      "-" if r["stats_cached"] is None else ("yes" if r["stats_cached"] else "no"),
                      "-" if r["edgekit_gate"] is None else ("pass" if r["edgekit_gate"] else "FAIL")])
    print_table(headers, table)
    total = time.perf_counter() - t_start
    print(f"\nbenchmark wall time {total:.1f} s (after imports); "
          + (f"outputs kept in {work}" if args.keep else "temp outputs removed (--keep keeps them)"))
    results["meta"]["wall_seconds"] = total
    figures.note("inputs are GENERATED (no real data ships with these models): parity is agreement on synthetic inputs")
    for r in rows:
        who = "published int8" if r["producer"].startswith("published") else f"edgekit {r['model']} --method {r['method']}"
        src = (f"edgekit.parity.compare (BUILTIN_REF) vs the published float .tflite, {args.eval} generated held-out "
               f"samples")
        if "error" in r:
            figures.add(f"{r['task']}: {who} failed", r["error"], "", method="count", source="edgekit.quantize.quantize")
            continue
        figures.add(f"{r['task']}: {who} SQNR", r["sqnr_db"], "dB", source=src)
        figures.add(f"{r['task']}: {who} cosine", r["cosine"], "", source=src)
        figures.add(f"{r['task']}: {who} size", r["size_bytes"], "B", method="count", source="file size")
        if r["seconds"] is not None:
            figures.add(f"{r['task']}: {who} quantize wall time", round(r["seconds"], 2), "s",
                        source=f"one edgekit.quantize.quantize() call, {args.calib} calibration samples, this host")
    figures.write(args.figures)
    results["meta"]["workdir"] = str(work) if args.keep else None
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        from edgekit.report import json_safe

        args.json.write_text(json.dumps(json_safe(results), indent=2) + "\n")
        print(f"wrote {args.json}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    failed = [r for r in rows if "error" in r]
    if failed:
        print(f"{len(failed)} edgekit quantize run(s) FAILED: " + "; ".join(f"{r['task']} {r['model']} {r['method']}" for r in failed),
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
