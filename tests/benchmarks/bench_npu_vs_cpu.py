#!/usr/bin/env python
"""NPU vs CPU for the MLPerf Tiny int8 models (KWS, IC, AD): Vela's Ethos-U estimate next to our Cortex-M firmware.

One table per model and target. NPU columns are Vela 5.2's performance model (estimated: cycles, time at the NPU
clock of the system config, MAC utilization, SRAM) for ethos-u55-128, ethos-u55-256 and ethos-u65-256 with Vela's
default system config / memory mode of each. CPU columns are edgekit's own firmware on QEMU: instructions per
inference MEASURED with the QEMU instruction-count plugin (tests/benchmarks/bench_firmware_mlperf.py's bench_device,
imported, not copied), and the CPU time ESTIMATED from the board profile's cycle model (instructions x
cycles_per_instruction / clock_hz; the CPI is an assumption, see devices/SOURCES.md).

    .venv/bin/python tests/benchmarks/bench_npu_vs_cpu.py [--boards mps3-an547[,mps2-an386]] [--cpu-json FILE]
                                                          [--json out/bench/npu_vs_cpu.json]

The M55 (mps3-an547) counts are always measured (about a minute with cached builds). M4 (mps2-an386) counts are
measured too when listed in --boards; with --cpu-json a JSON written by bench_firmware_mlperf.py supplies rows for
boards not measured here, labelled with that file. Exits 0 with "skipped" if the models, QEMU or the toolchain are
missing.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _figures import FigureLog, bench_options  # noqa: E402
from tests.benchmarks.bench_firmware_mlperf import DEFAULT_MODE, bench_device, mlperf_dir, tflm_figures  # noqa: E402
from tests.benchmarks.bench_firmware_mlperf import MODELS as FIRMWARE_MODELS  # noqa: E402

# the committed MLPerf Tiny files (Vela compiles files; the VWW-style model of the firmware benchmark is built)
MODELS = {name: file for name, file in FIRMWARE_MODELS.items() if file}

NPU_TARGETS = ("ethos-u55-128", "ethos-u55-256", "ethos-u65-256")


def npu_rows(folder: Path, models=None, targets=NPU_TARGETS) -> list:
    from edgekit.compile.npu import vela_estimate
    from edgekit.compile.vela_tool import VelaOptions

    rows = []
    for name, file in MODELS.items():
        if models is not None and name not in models:
            continue
        for target in targets:
            with tempfile.TemporaryDirectory() as tmp:
                result, _ = vela_estimate(folder / file, VelaOptions(accelerator=target), keep=Path(tmp))
            r = result.report
            rows.append({"model": name, "target": target, "label": r.estimate.label,
                         "cycles": r.performance.npu_cycles_total,
                         "time_ms": r.performance.inference_time_ms,
                         "clock_hz": r.target.npu_clock_hz,
                         "utilization_percent": r.performance.mac_utilization_percent,
                         "sram_bytes": r.memory.sram_used_bytes, "dram_bytes": r.memory.dram_used_bytes,
                         "off_chip_flash_bytes": r.memory.off_chip_flash_used_bytes,
                         "all_on_npu": r.placement.all_on_npu, "macs": r.performance.macs_total,
                         "model_sha256": r.model.sha256})
    return rows


def cpu_rows(folder: Path, boards: list, cpu_json: Path | None, models=None) -> list:
    from edgekit.firmware.boards import load_board

    rows = []
    for board in boards:
        profile = load_board(board)
        cpi = profile.cycle_model.cycles_per_instruction
        for name, file in MODELS.items():
            if models is not None and name not in models:
                continue
            print(f"measuring {name} on {board} (QEMU) ...", file=sys.stderr, flush=True)
            started = time.monotonic()
            data = (folder / file).read_bytes()
            r = bench_device(name, data, board, DEFAULT_MODE, samples=1, tflm=tflm_figures(name, data))
            rows.append(_cpu_row(name, board, r["instructions"], profile, cpi,
                                 f"measured here: QEMU {board} + ekcount plugin, --optimize {DEFAULT_MODE} "
                                 f"({time.monotonic() - started:.0f} s)", r["ram"]["arena"]))
    if cpu_json is not None and cpu_json.is_file():
        data = json.loads(cpu_json.read_text())
        for r in data.get("rows", []):
            if r["board"] in boards or r.get("mode") != DEFAULT_MODE or r.get("instructions") is None:
                continue
            profile = load_board(r["board"])
            rows.append(_cpu_row(r["model"], r["board"], r["instructions"], profile,
                                 profile.cycle_model.cycles_per_instruction,
                                 f"measured earlier: {cpu_json.name} (--optimize {DEFAULT_MODE})",
                                 (r.get("ram") or {}).get("arena")))
    return rows


def _cpu_row(model, board, instructions, profile, cpi, source, arena):
    cycles = instructions * cpi
    return {"model": model, "board": board, "core": profile.core, "instructions": instructions,
            "instructions_source": source, "cycles_estimated": cycles, "clock_hz": profile.clock_hz,
            "time_ms_estimated": cycles / profile.clock_hz * 1e3, "cpi": cpi, "arena_bytes": arena,
            "time_source": f"estimated: instructions x {cpi} CPI (devices/{board}.yaml cycle_model, an assumption) / "
                           f"{profile.clock_hz / 1e6:g} MHz"}


def table(npu: list, cpu: list) -> str:
    head = ("model", "runs on", "work per inference", "time", "MAC util.", "SRAM / arena", "source")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for model in MODELS:
        for r in (x for x in npu if x["model"] == model):
            lines.append(f"| {model} | {r['target']} @ {r['clock_hz'] / 1e6:g} MHz | {r['cycles']:,} NPU cycles (est.) | "
                         f"{r['time_ms']:.4f} ms (est.) | {r['utilization_percent']:.1f} % (est.) | "
                         f"{r['sram_bytes'] or r['dram_bytes']:,} B {'SRAM' if r['sram_bytes'] else 'DRAM'} (Vela) | "
                         f"{r['label']} |")
        for r in (x for x in cpu if x["model"] == model):
            lines.append(f"| {model} | {r['core']} ({r['board']}) @ {r['clock_hz'] / 1e6:g} MHz | "
                         f"{r['instructions']:,} instr (measured) | {r['time_ms_estimated']:.2f} ms (est.) | – | "
                         f"{r['arena_bytes']:,} B arena | {r['instructions_source']}; time {r['time_source']} |")
    return "\n".join(lines)


def speedups(npu: list, cpu: list) -> list:
    out = []
    for c in cpu:
        for n in (x for x in npu if x["model"] == c["model"]):
            out.append(f"{c['model']}: {n['target']} (est. {n['time_ms']:.4f} ms at {n['clock_hz'] / 1e6:g} MHz) vs "
                       f"{c['core']} (est. {c['time_ms_estimated']:.2f} ms at {c['clock_hz'] / 1e6:g} MHz): "
                       f"{c['time_ms_estimated'] / n['time_ms']:.0f}x; at equal clocks "
                       f"{c['cycles_estimated'] / n['cycles']:.0f}x fewer cycles (both sides estimated)")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default="mps3-an547", help="boards to MEASURE on QEMU (comma list; default mps3-an547)")
    parser.add_argument("--cpu-json", type=Path, default=REPO / "out" / "bench" / "firmware_mlperf.json",
                        help="bench_firmware_mlperf.py JSON for boards not measured here (default out/bench/...)")
    parser.add_argument("--json", type=Path, default=REPO / "out" / "bench" / "npu_vs_cpu.json")
    bench_options(parser)
    args = parser.parse_args()
    log = FigureLog("bench_npu_vs_cpu", smoke=args.smoke)
    models, targets = None, NPU_TARGETS
    if args.smoke:  # the smallest model, one NPU, one board; nothing read from or written to out/bench
        models = {k for k in MODELS if k.lower() == "ad"} or {list(MODELS)[-1]}
        targets, args.boards, args.cpu_json = NPU_TARGETS[:1], "mps3-an547", None
        if args.json == parser.get_default("json"):
            args.json = None
    folder = mlperf_dir()
    missing = [tool for tool in ("qemu-system-arm", "arm-none-eabi-gcc") if shutil.which(tool) is None]
    if not folder.is_dir() or missing:
        print(f"skipped: {'MLPerf Tiny models not found at ' + str(folder) if not folder.is_dir() else ''}"
              f"{' missing ' + ', '.join(missing) if missing else ''}")
        return 0
    from edgekit.provenance import host_info, tool_versions, utc_now

    boards = [b for b in args.boards.split(",") if b]
    npu = npu_rows(folder, models, targets)
    cpu = cpu_rows(folder, boards, args.cpu_json, models)
    for r in npu:
        src = f"Vela performance model ({r['label']}), {r['target']} at {r['clock_hz'] / 1e6:g} MHz"
        log.add(f"{r['model']} on {r['target']}: NPU cycles", r["cycles"], "cycles", method="estimated", source=src)
        log.add(f"{r['model']} on {r['target']}: inference time", r["time_ms"], "ms", method="estimated", source=src)
    for r in cpu:
        log.add(f"{r['model']} on {r['board']}: instructions", r["instructions"], "instr", source=r["instructions_source"])
        log.add(f"{r['model']} on {r['board']}: inference time", round(r["time_ms_estimated"], 3), "ms",
                method="estimated", source=r["time_source"])
    log.write(args.figures)
    print(table(npu, cpu))
    print()
    for line in speedups(npu, [c for c in cpu if c["board"] == "mps3-an547"]):
        print(line)
    print("\nNPU figures: Vela's performance model (estimated; nothing ran on an NPU). CPU instruction counts: measured "
          "on QEMU (not cycle-accurate); CPU times: estimated from the stated CPI. The NPU time excludes the CPU's "
          "driver overhead; the clocks differ (Vela system config vs the QEMU board's profile clock).")
    result = {"edgekit_bench": "npu_vs_cpu", "npu": npu, "cpu": cpu,
              "signature": {"tools": tool_versions(("edgekit", "ethos-u-vela", "numpy")), "host": host_info(),
                            "created": utc_now()}}
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
