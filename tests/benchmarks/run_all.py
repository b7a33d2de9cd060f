#!/usr/bin/env python
"""Run every benchmark (`make bench`) and write ONE summary of every figure and what produced it.

    .venv/bin/python tests/benchmarks/run_all.py [--smoke] [--out out/bench] [--only NAME ...]

Each benchmark runs in its own process with ``--figures OUT/figures/NAME.json`` (see _figures.py); a benchmark
that does not take --figures yet is run with ``--json`` and its rows are turned into figures here. Writes
OUT/summary.json (machines) and OUT/summary.md (people): per benchmark its command, exit code, wall time and
figures (value, unit, measured/estimated, source). Exit 1 if any benchmark failed.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

# in `make bench` order: bench_firmware_mlperf writes the M4 rows bench_npu_vs_cpu reads
BENCHMARKS = (
    "bench_quantize_overhead",
    "bench_mlperf_quantize",
    "bench_firmware_mlperf",
    "bench_runner_overhead",
    "bench_qemu_boards",
    "bench_kernels_qemu",
    "bench_mixed_precision",
    "bench_onnx_methods",
    "bench_npu_vs_cpu",
    "bench_optimized_kernels",
    "bench_ray_parity",
    "bench_lab_matrix",
    "bench_cycle_estimates",
    "bench_model_zoo",
    "bench_weight_flash",
)


def script(name: str) -> Path:
    return HERE / f"{name}.py"


def takes(name: str, option: str) -> bool:
    """Whether a benchmark script accepts ``option`` (directly or through _figures.bench_options)."""
    text = script(name).read_text()
    return option in text or ("bench_options(" in text and option in ("--smoke", "--figures"))


def command(name: str, out: Path, smoke: bool) -> List[str]:
    cmd = [sys.executable, str(script(name))]
    if smoke:
        cmd.append("--smoke")
    if takes(name, "--figures"):
        cmd += ["--figures", str(out / "figures" / f"{name}.json")]
    elif takes(name, "--json"):
        cmd += ["--json", str(out / "raw" / f"{name}.json")]
    return cmd


def run_one(name: str, out: Path, smoke: bool) -> Dict[str, Any]:
    if smoke and not takes(name, "--smoke"):
        print(f"== {name}: skipped (no --smoke mode in this version of the script)", flush=True)
        return {"benchmark": name, "command": "-", "exit_code": 0, "wall_seconds": 0.0, "log": "-", "figures": [],
                "notes": ["skipped: the script has no --smoke mode"]}
    cmd = command(name, out, smoke)
    log_path = out / "logs" / f"{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
    started = time.monotonic()
    with open(log_path, "w") as log:
        code = subprocess.run(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT).returncode
    seconds = time.monotonic() - started
    print(f"   exit {code} after {seconds:.1f} s (log {log_path})", flush=True)
    entry: Dict[str, Any] = {"benchmark": name, "command": " ".join(cmd[1:]), "exit_code": code,
                             "wall_seconds": round(seconds, 1), "log": str(log_path), "figures": [], "notes": []}
    figures = out / "figures" / f"{name}.json"
    raw = out / "raw" / f"{name}.json"
    if figures.is_file():
        data = json.loads(figures.read_text())
        entry["figures"], entry["notes"] = data.get("figures", []), data.get("notes", [])
    elif raw.is_file():
        entry["figures"] = figures_from_raw(name, json.loads(raw.read_text()))
        entry["notes"] = [f"figures taken from the benchmark's own --json output {raw}"]
    if code == 0 and not entry["figures"]:
        entry["notes"].append("no figures recorded")
    return entry


def figures_from_raw(name: str, data: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Figures of a benchmark that only writes its own JSON (bench_firmware_mlperf's ``rows``, bench_ray_parity's
    ``rows``, bench_optimized_kernels' timings)."""
    if name == "bench_optimized_kernels":
        src = f"MobileNetV2-like float model {data.get('size')} px, {data.get('calib')} calibration samples, this host"
        return [{"name": label, "value": data[key], "unit": unit, "method": "measured", "source": src}
                for key, label, unit in (("quantize_ratio", "edgekit quantize / bare converter", "x"),
                                         ("parity_ratio", "parity / bare LiteRT invoke loop", "x"),
                                         ("edgekit_s", "edgekit quantize wall time", "s"), ("parity_s", "parity wall time", "s"))
                if data.get(key) is not None]
    if name == "bench_ray_parity":
        figures = []
        for r in data.get("rows", []):
            src = (f"ray_parity {r.get('model', 'KWS')} float vs int8 on {r['samples']} generated inputs, local Ray, "
                   f"{r['workers']} worker(s)")
            for field, unit in (("samples_per_s", "samples/s"), ("wall_time_s", "s"), ("peak_rss_ray_mib", "MiB"),
                                ("peak_pss_ray_mib", "MiB"), ("peak_uss_ray_mib", "MiB"), ("peak_map_actor_uss_mib", "MiB"),
                                ("peak_object_store_mib", "MiB"), ("load_average", "")):
                if r.get(field) is None:  # figures of an older run have no PSS/USS/object store/load
                    continue
                figures.append({"name": f"{r['dataset']} ({r['samples']} samples), {r['workers']} worker(s): "
                                        f"{field.replace('_', ' ')}", "value": r[field], "unit": unit,
                                "method": "measured", "source": src})
        if data.get("scaling_efficiency") is not None:
            figures.append({"name": "scaling efficiency 1 -> 2 workers", "value": data["scaling_efficiency"], "unit": "",
                            "method": "measured", "source": "ratio of the measured throughputs"})
        return figures
    return firmware_figures(data)


def firmware_figures(data: Dict[str, Any]) -> List[Dict[str, Any]]:
    """bench_firmware_mlperf's rows (one per model, board and --optimize mode) as figures: instructions, RAM and
    flash splits, bit-exactness and the ratios against TFLM's figures (with where those come from)."""
    figures = []
    for r in data.get("rows", []):
        key = f"{r['model']} on {r['board']} ({r['mode']})"
        device = f"QEMU {r['board']}, edgekit firmware --optimize {r['mode']}"
        ram, flash, targets = r.get("ram") or {}, r.get("flash") or {}, r.get("targets") or {}
        tflm_source = (r.get("tflm") or {}).get("method", "TFLM figure")
        rows = [
            ("instructions per inference", r.get("instructions"), "instr", "measured", device + ", ekcount plugin (exact)"),
            ("instructions per MAC", r["instructions"] / r["macs"] if r.get("instructions") and r.get("macs") else None,
             "instr/MAC", "measured", device + ", MACs counted from the model"),
            ("RAM (arena + mutable state)", ram.get("runtime"), "B", "measured", device + ", reported by the device"),
            ("arena", ram.get("arena"), "B", "count", "edgekit memory plan"),
            ("stack high-water mark", ram.get("stack_high_water_device"), "B", "measured", device + ", painted stack"),
            ("flash total", flash.get("total"), "B", "count", "linker map of the built ELF"),
            ("runtime code", flash.get("runtime_code"), "B", "count", "linker map: runtime core + linked kernels"),
            ("generated model API", flash.get("model_api"), "B", "count", "linker map: edgekit_model.c (not runtime code)"),
            ("prepared model data", flash.get("prepared"), "B", "count", "linker map"),
            ("bit-exact vs LiteRT BUILTIN_REF", r.get("bit_exact"), "", "measured", device + " outputs vs BUILTIN_REF"),
            ("RAM / TFLM arena", targets.get("ram_ratio"), "x", "measured", f"our RAM vs TFLM's arena ({tflm_source})"),
            ("instructions / TFLM+CMSIS-NN", targets.get("instr_ratio"), "x", "measured",
             f"our instructions vs TFLM+CMSIS-NN ({tflm_source})"),
        ]
        figures += [{"name": f"{key}: {name}", "value": value, "unit": unit, "method": method, "source": source}
                    for name, value, unit, method, source in rows if value is not None]
    return figures


def markdown(summary: Dict[str, Any]) -> str:
    lines = [f"# edgekit benchmarks{' (smoke)' if summary['smoke'] else ''}", "",
             f"Run {summary['started']} on {summary['host']['platform']} (Python {summary['host']['python']}), "
             f"{summary['host']['cpus']} CPUs, load average at start {summary['host']['load_average_1_5_15_min']['start']}, "
             f"total {summary['wall_seconds']:.0f} s (wall times depend on the load). Every figure says how it was obtained (measured / estimated / "
             "count / quoted) and from what.", "",
             "| benchmark | exit | wall time | figures |", "|---|---|---|---|"]
    for b in summary["benchmarks"]:
        lines.append(f"| {b['benchmark']} | {b['exit_code']} | {b['wall_seconds']:.0f} s | {len(b['figures'])} |")
    for b in summary["benchmarks"]:
        lines += ["", f"## {b['benchmark']}", "", f"`{b['command']}` — exit {b['exit_code']}, {b['wall_seconds']:.0f} s, "
                  f"log `{b['log']}`", ""]
        lines += [f"- {n}" for n in b["notes"]]
        if b["notes"]:
            lines.append("")
        if b["figures"]:
            lines += ["| figure | value | unit | how | source |", "|---|---|---|---|---|"]
            for f in b["figures"]:
                value = f"{f['value']:.6g}" if isinstance(f["value"], float) else str(f["value"])
                lines.append(f"| {f['name']} | {value} | {f['unit']} | {f['method']} | {f['source']} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="every benchmark in its --smoke mode")
    parser.add_argument("--out", type=Path, default=REPO / "out" / "bench", help="output folder (default out/bench)")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, help="run only these benchmarks")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    started, t0 = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), time.monotonic()
    load_at_start = [round(v, 2) for v in os.getloadavg()]
    entries = [run_one(name, out, args.smoke) for name in (args.only or BENCHMARKS)]
    summary = {"smoke": args.smoke, "started": started, "wall_seconds": round(time.monotonic() - t0, 1),
               "host": {"python": platform.python_version(), "platform": platform.platform(),
                        "cpus": os.cpu_count(), "load_average_1_5_15_min": {
                            "start": load_at_start, "end": [round(v, 2) for v in os.getloadavg()]}},
               "benchmarks": entries}
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.md").write_text(markdown(summary))
    failed = [e["benchmark"] for e in entries if e["exit_code"] != 0]
    print(f"wrote {out / 'summary.json'} and summary.md; {len(entries) - len(failed)} of {len(entries)} benchmarks passed"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
