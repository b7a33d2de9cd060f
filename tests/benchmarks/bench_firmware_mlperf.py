#!/usr/bin/env python
"""MLPerf Tiny int8 models (KWS, IC, AD) and a MobileNet-v1 0.25 96x96 VWW-style model as edgekit firmware on
QEMU mps2-an386 (Cortex-M4F) and mps3-an547 (Cortex-M55), in every --optimize mode (speed, balanced, ram).

Per model, board and mode: exact instructions per inference (QEMU ekcount plugin), RAM the runtime needs (arena +
mutable state reported by the device; the stack high-water mark measured on the device next to it), flash split
from the linker map (model, prepared model data, runtime code = core + linked kernels, startup/protocol/libc),
bit-exactness of the device outputs against LiteRT BUILTIN_REF, the ratios against TFLM's figures and whether
issue 12's targets are met (RAM <= 0.5x TFLM's smallest working arena; instructions <= 0.5x TFLM+CMSIS-NN on the
M4, KWS <= 0.7x on the M55; runtime code <= 25 KB for KWS).

TFLM figures for KWS/IC/AD are quoted from real TFLM runs on the same emulator (../shared/TOOLCHAIN.md; not
re-measured here). For the VWW-style model TFLM's arena is measured here with the tflite-micro python package
(a LOWER BOUND of the 32-bit device figure: the python runtime's 64-bit arena minus its pointer-sized bookkeeping
is what `measure_tflm_arena` estimates); no TFLM instruction count exists for it, so its instruction target is
"not available".

Also built here (tests/benchmarks/*_model.py): `VWW-T`, the VWW-style model with trained-like statistics (dead filters,
per-channel scales over decades; on mps2-an386 and mps3-an547), and `HLM-SAME` / `HLM-PAD`, a hand-landmark-style
model with its depthwise padding inside the op or as PAD + VALID (same weights); with both in one run the benchmark
prints the depthwise instructions/MAC of the two forms and their ratio (issue 29's target: <= 1.5x). Every device
row also gets a line of instructions and instructions/MAC per op class (measured).

    .venv/bin/python tests/benchmarks/bench_firmware_mlperf.py [--json out/bench/firmware_mlperf.json]
        [--md out/bench/firmware_mlperf.md] [--samples N] [--models KWS,AD] [--modes balanced]
        [--weights auto|int8|relaid] [--smoke]

--smoke: host only (no firmware build, no QEMU): every mode of KWS and AD prepared and run through the same C
runtime on this host, bit-exact against BUILTIN_REF, RAM figures from the prepared plan (32-bit state estimated).
Models come from $EDGEKIT_MLPERF_DIR or tests/fixtures/mlperf_tiny; without qemu-system-arm / arm-none-eabi-gcc
the full run prints "skipped". Firmware builds are cached ($EDGEKIT_CACHE_DIR).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

MODELS = {"KWS": "kws_ref_model_int8.tflite", "IC": "ic_resnet8_int8.tflite", "AD": "ad_autoencoder_int8.tflite",
          "VWW": None, "VWW-T": None, "HLM-SAME": None, "HLM-PAD": None}
# built by tests/benchmarks/*_model.py: VWW-T = the VWW-style model with trained-like statistics (issue 25: dead
# filters, per-channel scales over decades); HLM-SAME / HLM-PAD = a hand-landmark-style model with the depthwise
# padding inside the op / as separate PAD ops, same weights (issue 29)
BUILT_MODELS = {"VWW": ("vww_model", "vww_int8", {}), "VWW-T": ("vww_model", "vww_int8", {"trained_like": True}),
                "HLM-SAME": ("landmark_model", "landmark_int8", {"padding": "same"}),
                "HLM-PAD": ("landmark_model", "landmark_int8", {"padding": "pad"})}
MODES = ("speed", "balanced", "ram")
DEFAULT_MODE = "balanced"
# (board, model) pairs measured; mps3-an547 for KWS only (the M55 target of the issue)
RUNS = [("mps2-an386", m) for m in MODELS] + [("mps3-an547", "KWS"), ("mps3-an547", "VWW-T")]
# TOOLCHAIN.md: real TFLM built outside this project, QEMU mps2-an386, gcc 12.2 -O2, one Invoke after warm-up.
TFLM_REFERENCE = {
    "KWS": {"reference_kernels": 43.0e6, "cmsis_nn": 7.70e6, "min_arena_32bit": 22784},
    "IC": {"reference_kernels": 107.4e6, "cmsis_nn": 29.9e6, "min_arena_32bit": 54352},
    "AD": {"reference_kernels": 1.95e6, "cmsis_nn": 0.58e6, "min_arena_32bit": 2704},
}
TFLM_M55_KWS_CMSIS_HELIUM = 1.81e6
RAM_RATIO_TARGET = 0.5
INSTR_RATIO_TARGET = {"mps2-an386": 0.5, "mps3-an547": 0.7}
RUNTIME_CODE_TARGET = {"KWS": 25 * 1024}
POINTWISE_RATE_TARGET = 1.2  # issue 25: no 1x1 CONV_2D above 1.2 instructions/MAC on the Cortex-M4 (mps2-an386)
SEEDS = {"KWS": 1, "IC": 2, "AD": 3, "VWW": 4, "VWW-T": 4, "HLM-SAME": 5, "HLM-PAD": 5}


def mlperf_dir() -> Path:
    return Path(os.environ.get("EDGEKIT_MLPERF_DIR", REPO / "tests" / "fixtures" / "mlperf_tiny"))


def built_model_bytes(name: str) -> Optional[bytes]:
    """A model built by one of tests/benchmarks/*_model.py (BUILT_MODELS), or None when that builder is not on this
    branch."""
    import importlib

    module_name, function, kwargs = BUILT_MODELS[name]
    try:
        sys.path.insert(0, str(REPO / "tests" / "benchmarks"))
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    build = getattr(module, function, None)
    return build(**kwargs) if build else None


def model_bytes(name: str) -> Optional[bytes]:
    if name in BUILT_MODELS:
        return built_model_bytes(name)
    path = mlperf_dir() / MODELS[name]
    return path.read_bytes() if path.is_file() else None


def inputs_for(model: bytes, samples: int, seed: int):
    from edgekit.tflite_graph import read_graph

    graph = read_graph(model)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(samples):
        sample = {}
        for i in graph.inputs:
            t = graph.tensors[i]
            sample[t.name] = rng.integers(-128, 128, size=t.shape, dtype=np.int8)
        out.append(sample)
    return out, graph


def tflm_figures(name: str, model: bytes) -> Dict[str, Any]:
    """TFLM's smallest working 32-bit arena and CMSIS-NN instructions: quoted (TOOLCHAIN.md) or, for models without
    a quoted figure, the arena measured with the tflite-micro python package (a lower bound)."""
    if name in TFLM_REFERENCE:
        ref = TFLM_REFERENCE[name]
        return {"arena_32bit": ref["min_arena_32bit"], "cmsis_nn_m4": ref["cmsis_nn"],
                "cmsis_nn_m55": TFLM_M55_KWS_CMSIS_HELIUM if name == "KWS" else None,
                "method": "quoted: real TFLM on QEMU mps2-an386 (../shared/TOOLCHAIN.md)"}
    from edgekit.firmware.tflm import measure_tflm_arena

    arena = measure_tflm_arena(model)
    estimate = cmsis_nn_estimate(model)
    method = "measured lower bound: tflite-micro python package arena, 32-bit estimate"
    if estimate is None:
        method += " (no TFLM instruction figure for this model)"
    else:
        low, high, rates = estimate
        method += (f"; CMSIS-NN instructions ESTIMATED (not measured): this model's MACs x the measured TFLM+CMSIS-NN "
                   f"per-MAC rates of the convolutional models ({rates}) = {low / 1e6:.2f}-{high / 1e6:.2f} M, the low "
                   f"end used for the 0.5x target")
    return {"arena_32bit": arena.estimated_32bit, "cmsis_nn_m4": None, "cmsis_nn_m55": None,
            "cmsis_nn_m4_estimated": estimate[0] if estimate else None, "method": method}


def cmsis_nn_estimate(model: bytes) -> Optional[tuple]:
    """(low, high, description) TFLM+CMSIS-NN M4 instructions ESTIMATED for a model without a measured figure:
    its MACs times the measured per-MAC rates of the convolutional MLPerf models (KWS, IC); None without them."""
    from edgekit.tflite_graph import read_graph

    macs = sum(read_graph(model).macs().values())
    rates = {}
    for name in ("KWS", "IC"):
        ref = model_bytes(name)
        if ref is not None:
            rates[name] = TFLM_REFERENCE[name]["cmsis_nn"] / sum(read_graph(ref).macs().values())
    if not rates or not macs:
        return None
    text = ", ".join(f"{n} {r:.2f}/MAC" for n, r in rates.items())
    return min(rates.values()) * macs, max(rates.values()) * macs, text


def targets(name: str, board: str, tflm: Dict[str, Any], instructions: Optional[float], ram: int,
            runtime_code: Optional[int]) -> Dict[str, Any]:
    ram_limit = int(RAM_RATIO_TARGET * tflm["arena_32bit"])
    ref = tflm["cmsis_nn_m4"] if board == "mps2-an386" else tflm["cmsis_nn_m55"]
    if ref is None and board == "mps2-an386":
        ref = tflm.get("cmsis_nn_m4_estimated")  # estimated (see tflm["method"]); the ratio column marks it "est."
    instr_limit = INSTR_RATIO_TARGET[board] * ref if ref else None
    code_limit = RUNTIME_CODE_TARGET.get(name)
    return {
        "ram_limit": ram_limit, "ram_ratio": ram / tflm["arena_32bit"], "ram_met": ram <= ram_limit,
        "instr_limit": instr_limit, "instr_ratio": (instructions / ref) if (ref and instructions) else None,
        "instr_met": (instructions <= instr_limit) if (instr_limit and instructions) else None,
        "runtime_code_limit": code_limit,
        "runtime_code_met": (runtime_code <= code_limit) if (code_limit and runtime_code is not None) else None,
    }


def bench_device(name: str, model: bytes, board: str, mode: str, samples: int, tflm: Dict[str, Any],
                 weights: str = "auto") -> Dict[str, Any]:
    """Generate + build the firmware for one mode (and --weights mode), run it under QEMU, collect every figure."""
    from edgekit.firmware.generate import cached_firmware
    from edgekit.run.base import RunRequest
    from edgekit.run.runners.mcu import QemuRunner
    from edgekit.run.resolve import resolve_device

    inputs, graph = inputs_for(model, samples, seed=SEEDS[name])
    started = time.monotonic()
    firmware = cached_firmware(model, board, source=f"{name.lower()}.tflite", optimize=mode, weights=weights)
    build_s = time.monotonic() - started
    started = time.monotonic()
    run = QemuRunner(resolve_device(f"qemu:{board}")).run(
        RunRequest(artifact=firmware.elf, inputs=inputs, iterations=samples, timeout_s=900))
    run_s = time.monotonic() - started
    info, work, memory = firmware.info.to_dict(), run.work.present(), run.memory.present()
    exact = work["outputs_bit_exact"]
    arena = info["ram"]["runtime"]["arena"]
    state = memory.get("state_used_bytes")
    ram = arena + (state or 0)
    split = info["flash"].get("split") or {}
    instructions = work["instructions_per_inference"]
    return {
        "model": name, "board": board, "mode": mode, "instructions": instructions,
        "macs": sum(graph.macs().values()),
        "ram": {"runtime": ram, "arena": arena, "mutable_state_device": state,
                "stack_high_water_device": memory.get("stack_used_bytes"),
                "plain_tflite_arena": info["plan"]["plain_in_place_tflite"]["arena_bytes"]},
        "flash": {"total": info["flash_bytes"], "model": split.get("model"), "prepared": split.get("prepared"),
                  "runtime_code": split.get("runtime_code"), "runtime_core": split.get("runtime_core"),
                  "runtime_kernels": split.get("runtime_kernels"), "model_api": split.get("model_api"),
                  "startup_protocol_libc": (split.get("startup_protocol") or 0) + (split.get("libc") or 0)},
        "overlaps": len(info["plan"].get("overlaps") or []),
        "tflm": tflm, "targets": targets(name, board, tflm, instructions, ram, split.get("runtime_code")),
        "bit_exact": bool(exact["value"]), "differing_elements": exact["differing_elements"],
        "output_elements": exact["total_elements"],
        "seconds": {"generate_and_build": round(build_s, 1), "qemu_run": round(run_s, 1)},
        "per_op_instructions": work.get("per_op_instructions") or [],
        "pointwise_ops": pointwise_ops(graph),
    }


def pointwise_ops(graph) -> Dict[int, List[int]]:
    """{op index: [input channels, output channels]} of the graph's 1x1 CONV_2D layers."""
    out = {}
    for op in graph.ops:
        if op.name == "CONV_2D" and len(op.inputs) > 1:
            shape = graph.tensors[op.inputs[1]].shape
            if len(shape) == 4 and shape[1] == 1 and shape[2] == 1:
                out[op.index] = [int(shape[3]), int(shape[0])]
    return out


def pointwise_check(rows: List[Dict[str, Any]]) -> List[str]:
    """Issue 25's per-layer target on the Cortex-M4: no 1x1 CONV_2D above POINTWISE_RATE_TARGET instructions/MAC
    (measured per op by the ekcount plugin); one line per device row with 1x1 layers, PASS or FAIL."""
    lines = []
    for r in rows:
        if r["board"] != "mps2-an386" or not r.get("pointwise_ops"):
            continue
        rates = []
        for e in r.get("per_op_instructions") or []:
            shape = r["pointwise_ops"].get(e["index"]) or r["pointwise_ops"].get(str(e["index"]))
            if shape and e.get("macs"):
                rates.append((e["instructions"] / e["macs"], e["index"], shape))
        if not rates:
            continue
        worst, index, (cin, cout) = max(rates)
        over = [f"op {i} ({c[0]} -> {c[1]}) {v:.2f}" for v, i, c in sorted(rates, key=lambda t: t[1])
                if v > POINTWISE_RATE_TARGET]
        lines.append(f"1x1 CONV_2D check (measured, ekcount): {r['model']} {r['board']} {r['mode']}: worst op {index} "
                     f"({cin} -> {cout} channels) {worst:.3f} instr/MAC over {len(rates)} layers, target <= "
                     f"{POINTWISE_RATE_TARGET}: " + ("PASS" if not over else "FAIL (" + ", ".join(over) + ")"))
    return lines


def reference_outputs(model: bytes, arrays: List[np.ndarray]) -> List[np.ndarray]:
    """LiteRT BUILTIN_REF (the bit-exactness reference) on raw int8 inputs."""
    from ai_edge_litert import interpreter as litert

    interp = litert.Interpreter(model_content=model, num_threads=1,
                                experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    interp.allocate_tensors()
    for detail, x in zip(interp.get_input_details(), arrays):
        interp.set_tensor(detail["index"], x)
    interp.invoke()
    return [interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()]


def bench_host(name: str, model: bytes, mode: str, tflm: Dict[str, Any]) -> Dict[str, Any]:
    """Smoke: the prepared model on this host (same C code), bit-exact vs BUILTIN_REF; no device figures."""
    from edgekit.firmware.generate import memory_plan
    from edgekit.firmware.host_runtime import HostRuntime
    from edgekit.tflite_graph import read_graph
    inputs, graph = inputs_for(model, 1, seed=SEEDS[name])
    rt = HostRuntime(model, optimize=mode)
    got = rt.invoke([inputs[0][graph.tensors[i].name] for i in graph.inputs])
    want = reference_outputs(model, [inputs[0][graph.tensors[i].name] for i in graph.inputs])
    exact = all(np.array_equal(np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)) for a, b in zip(got, want))
    plan = memory_plan(model, read_graph(model), name, mode)
    ram = plan["arena_bytes"] + plan["state_bytes"]
    return {
        "model": name, "board": "host", "mode": mode, "instructions": None, "macs": sum(graph.macs().values()),
        "ram": {"runtime": ram, "arena": plan["arena_bytes"], "mutable_state_device": None,
                "mutable_state_estimated_32bit": plan["state_bytes"], "stack_high_water_device": None,
                "plain_tflite_arena": plan["plain"]["arena_bytes"]},
        "flash": {"prepared": plan["prepared_bytes"], "model": len(model)},
        "overlaps": len(plan["overlaps"]), "tflm": tflm,
        "targets": targets(name, "mps2-an386", tflm, None, ram, None),
        "bit_exact": exact, "differing_elements": None, "output_elements": None,
    }


def _yes(v: Optional[bool]) -> str:
    return "n/a" if v is None else ("yes" if v else "NO")


def _num(v: Optional[float], fmt: str = "{:,}") -> str:
    return "–" if v is None else fmt.format(v)


def markdown(rows: List[Dict[str, Any]]) -> str:
    head = ("model", "board", "mode", "instructions", "instr / TFLM+CMSIS-NN", "RAM (arena + state)", "arena",
            "state", "stack HWM", "RAM / TFLM", "flash", "model", "prepared", "runtime code", "startup+proto+libc",
            "RAM target", "instr target", "code target", "bit-exact")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        t, ram, fl = r["targets"], r["ram"], r["flash"]
        lines.append("| " + " | ".join([
            r["model"], r["board"], r["mode"], _num(r["instructions"]),
            _num(t["instr_ratio"], "{:.2f}x" + (" (est.)" if r["tflm"].get("cmsis_nn_m4_estimated") else "")),
            _num(ram["runtime"]), _num(ram["arena"]),
            _num(ram["mutable_state_device"] if ram["mutable_state_device"] is not None
                 else ram.get("mutable_state_estimated_32bit")),
            _num(ram["stack_high_water_device"]), f"{t['ram_ratio']:.2f}x",
            _num(fl.get("total")), _num(fl.get("model")), _num(fl.get("prepared")), _num(fl.get("runtime_code")),
            _num(fl.get("startup_protocol_libc")),
            f"{_yes(t['ram_met'])} (<= {t['ram_limit']:,})",
            f"{_yes(t['instr_met'])}" + (f" (<= {t['instr_limit'] / 1e6:.2f} M)" if t["instr_limit"] else ""),
            _yes(t["runtime_code_met"]), _yes(r["bit_exact"]),
        ]) + " |")
    return "\n".join(lines)


def per_op_table(row: Dict[str, Any]) -> str:
    """One row's measured per-op instruction counts (ekcount plugin, one entry per op hook) with instructions/MAC."""
    lines = [f"per op: {row['model']} on {row['board']}, --optimize {row['mode']} (measured, ekcount plugin)",
             "| op | name | instructions | MACs | instr / MAC |", "|---|---|---|---|---|"]
    for e in row.get("per_op_instructions") or []:
        span = f"{e['index']}-{e['last_index']}" if e.get("last_index") is not None else str(e["index"])
        macs = e.get("macs")
        rate = f"{e['instructions'] / macs:.2f}" if macs else "–"
        lines.append(f"| {span} | {e.get('op')} | {e['instructions']:,} | {_num(macs)} | {rate} |")
    return "\n".join(lines)


def op_class_totals(row: Dict[str, Any]) -> Dict[str, List[int]]:
    """{op name: [instructions, MACs]} over one row's per-op counts (ops of a row-streamed group count as its first)."""
    totals: Dict[str, List[int]] = {}
    for e in row.get("per_op_instructions") or []:
        t = totals.setdefault(str(e.get("op")), [0, 0])
        t[0] += e["instructions"]
        t[1] += e.get("macs") or 0
    return totals


def op_class_summary(rows: List[Dict[str, Any]]) -> List[str]:
    """Per row: instructions and instructions/MAC per op class (measured); for the hand-landmark pair on the same
    board and mode, the depthwise rate with padding inside the op against the PAD + VALID form (issue 29: <= 1.5x)."""
    lines = []
    for r in rows:
        totals = op_class_totals(r)
        if not totals:
            continue
        parts = [f"{op} {n:,}" + (f" ({n / m:.2f}/MAC)" if m else "") for op, (n, m) in sorted(totals.items())]
        lines.append(f"op classes (measured, ekcount): {r['model']} {r['board']} {r['mode']}: " + ", ".join(parts))
    for same in (r for r in rows if r["model"] == "HLM-SAME"):
        for pad in (r for r in rows if r["model"] == "HLM-PAD" and r["board"] == same["board"]
                    and r["mode"] == same["mode"]):
            a, b = op_class_totals(same).get("DEPTHWISE_CONV_2D"), op_class_totals(pad).get("DEPTHWISE_CONV_2D")
            if a and b and a[1] and b[1]:
                ratio = (a[0] / a[1]) / (b[0] / b[1])
                lines.append(f"padded depthwise (measured, {same['board']} {same['mode']}): SAME inside the op "
                             f"{a[0] / a[1]:.2f} instr/MAC vs PAD + VALID {b[0] / b[1]:.2f} instr/MAC = {ratio:.2f}x "
                             f"(target <= 1.5x: {_yes(ratio <= 1.5)}); PAD ops "
                             f"{op_class_totals(pad).get('PAD', [0])[0]:,} instructions")
    return lines


def notes(rows: List[Dict[str, Any]]) -> str:
    tflm = {r["model"]: r["tflm"] for r in rows}
    out = ["TFLM figures: " + "; ".join(f"{m}: arena {t['arena_32bit']:,} B"
                                        + (f", CMSIS-NN {t['cmsis_nn_m4'] / 1e6:.2f} M instr (M4)" if t["cmsis_nn_m4"] else "")
                                        + (f", {t['cmsis_nn_m55'] / 1e6:.2f} M (M55 Helium)" if t["cmsis_nn_m55"] else "")
                                        + f" [{t['method']}]" for m, t in tflm.items())]
    out.append("RAM = arena + the mutable state the device reports (ek_prepared object + decoded tensor records); the "
               "stack high-water mark (painted stack, measured on the device) is listed next to it. Runtime code = "
               "runtime core + linked kernels from the linker map (excludes model, prepared data, startup, protocol, "
               "libc).")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=REPO / "out" / "bench" / "firmware_mlperf.json")
    parser.add_argument("--md", type=Path, default=None, help="Markdown table (default: next to --json)")
    parser.add_argument("--samples", type=int, default=2, help="input samples per model (default 2)")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of " + ",".join(MODELS))
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of " + ",".join(MODES))
    parser.add_argument("--boards", default=",".join(sorted({b for b, _ in RUNS})),
                        help="comma-separated subset of the boards (default: every board a model is measured on)")
    parser.add_argument("--weights", choices=("auto", "int8", "relaid"), default="auto",
                        help="--weights of the firmware (default auto, the generator's default: re-laid-out weight "
                             "copies within a flash budget of 1.2x the .tflite; relaid: every copy, fastest)")
    parser.add_argument("--per-op", action="store_true", help="also print each device row's per-op instructions")
    parser.add_argument("--smoke", action="store_true", help="host only: KWS and AD, every mode, bit-exact + RAM")
    args = parser.parse_args()
    md_path = args.md or args.json.with_suffix(".md")
    wanted = [m for m in args.models.split(",") if m]
    modes = [m for m in args.modes.split(",") if m]
    boards = [b for b in args.boards.split(",") if b]
    from edgekit.provenance import host_info, tool_versions, utc_now

    rows, skipped = [], []
    if args.smoke:
        for name in ("KWS", "AD"):
            model = model_bytes(name)
            if model is None:
                print(f"skipped: {name} model not found at {mlperf_dir()}")
                return 0
            for mode in MODES:
                rows.append(bench_host(name, model, mode, tflm_figures(name, model)))
    else:
        missing = [tool for tool in ("qemu-system-arm", "arm-none-eabi-gcc") if shutil.which(tool) is None]
        if missing:
            print(f"skipped: missing {', '.join(missing)}")
            return 0
        for board, name in RUNS:
            if name not in wanted or board not in boards:
                continue
            model = model_bytes(name)
            if model is None:
                skipped.append(f"{name}: model not available"
                               + (f" (tests/benchmarks/{BUILT_MODELS[name][0]}.py not on this branch)"
                                  if name in BUILT_MODELS else ""))
                continue
            tflm = tflm_figures(name, model)
            for mode in modes:
                print(f"{name} on {board}, --optimize {mode} ...", file=sys.stderr, flush=True)
                rows.append(bench_device(name, model, board, mode, args.samples, tflm, args.weights))
    table = markdown(rows)
    print(table)
    print()
    print(notes(rows))
    for s in skipped:
        print("skipped " + s)
    if args.per_op:
        for r in rows:
            if r.get("per_op_instructions"):
                print()
                print(per_op_table(r))
    for line in op_class_summary(rows) + pointwise_check(rows):
        print(line)
    default_rows = [r for r in rows if r["mode"] == DEFAULT_MODE]
    for r in default_rows:
        t = r["targets"]
        print(f"default (--optimize {DEFAULT_MODE}) {r['model']} on {r['board']}: RAM {_yes(t['ram_met'])}, "
              f"instructions {_yes(t['instr_met'])}, runtime code {_yes(t['runtime_code_met'])}, "
              f"bit-exact {_yes(r['bit_exact'])}")
    result = {"edgekit_bench": "firmware_mlperf", "smoke": args.smoke, "rows": rows, "skipped": skipped,
              "tflm_reference_toolchain_md": TFLM_REFERENCE, "tflm_m55_kws_cmsis_helium": TFLM_M55_KWS_CMSIS_HELIUM,
              "signature": {"tools": tool_versions(("edgekit", "numpy", "ai-edge-litert", "tflite-micro", "pyelftools")),
                            "host": host_info(), "created": utc_now()}}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
    md_path.write_text(f"# firmware MLPerf Tiny benchmark\n\n{table}\n\n{notes(rows)}\n")
    print(f"wrote {args.json} and {md_path}")
    return 0 if all(r["bit_exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
