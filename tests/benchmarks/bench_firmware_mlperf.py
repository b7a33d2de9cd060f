#!/usr/bin/env python
"""MLPerf Tiny int8 models (KWS, IC, AD) as edgekit firmware on QEMU mps2-an386 (Cortex-M4F) and mps3-an547 (M55).

Per model and board: exact instructions per inference (QEMU ekcount plugin), instructions per MAC (MACs counted
from the model's CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED shapes), the edgekit arena next to the arena the
TFLM python runtime needs for the same model (RecordingMicroAllocator, bisection, and our 32-bit estimate),
flash bytes from the linked ELF, and bit-exactness of the device outputs against LiteRT BUILTIN_REF.
Reference points measured with real TFLite Micro on the same emulator (../shared/TOOLCHAIN.md) are printed next
to ours; they are quoted, not re-measured here.

    .venv/bin/python tests/benchmarks/bench_firmware_mlperf.py [--json out/bench/firmware_mlperf.json] [--samples N]

Models come from $EDGEKIT_MLPERF_DIR or tests/fixtures/mlperf_tiny; the script exits 0 with "skipped" if they
(or qemu-system-arm / arm-none-eabi-gcc) are absent. Firmware builds are cached ($EDGEKIT_CACHE_DIR).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

MODELS = {"KWS": "kws_ref_model_int8.tflite", "IC": "ic_resnet8_int8.tflite", "AD": "ad_autoencoder_int8.tflite"}
BOARDS = ("mps2-an386", "mps3-an547")
# TOOLCHAIN.md: real TFLM built outside this project, QEMU mps2-an386, gcc 12.2 -O2, one Invoke after warm-up.
TFLM_REFERENCE = {
    "KWS": {"reference_kernels": 43.0e6, "cmsis_nn": 7.70e6, "min_arena_32bit": 22784},
    "IC": {"reference_kernels": 107.4e6, "cmsis_nn": 29.9e6, "min_arena_32bit": 54352},
    "AD": {"reference_kernels": 1.95e6, "cmsis_nn": 0.58e6, "min_arena_32bit": 2704},
}
TFLM_M55_KWS_CMSIS_HELIUM = 1.81e6
TARGET_INSTR_PER_MAC_M4 = 1.5
SEEDS = {"KWS": 1, "IC": 2, "AD": 3}


def mlperf_dir() -> Path:
    return Path(os.environ.get("EDGEKIT_MLPERF_DIR", REPO / "tests" / "fixtures" / "mlperf_tiny"))


def inputs_for(model: bytes, samples: int, seed: int):
    from edgekit.firmware.support import read_graph

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


def bench_one(name: str, path: Path, board: str, samples: int) -> dict:
    from edgekit.firmware.generate import cached_firmware
    from edgekit.firmware.tflm import measure_tflm_arena
    from edgekit.run.base import RunRequest
    from edgekit.run.mcu import QemuRunner
    from edgekit.run.resolve import resolve_device

    model = path.read_bytes()
    inputs, graph = inputs_for(model, samples, seed=SEEDS[name])
    started = time.monotonic()
    firmware = cached_firmware(model, board, source=str(path))
    build_s = time.monotonic() - started
    target = resolve_device(f"qemu:{board}")
    started = time.monotonic()
    run = QemuRunner(target).run(RunRequest(artifact=path, inputs=inputs, iterations=samples, timeout_s=600))
    run_s = time.monotonic() - started
    tflm = measure_tflm_arena(model)
    macs = sum(graph.macs().values())
    work = run.work
    exact = work["outputs_bit_exact"]
    return {
        "model": name, "file": path.name, "board": board,
        "instructions_per_inference": work["instructions_per_inference"],
        "instructions_spread": [work["instructions"]["min"], work["instructions"]["max"]],
        "macs": macs, "instructions_per_mac": work["instructions_per_inference"] / macs,
        "arena_bytes": firmware.info["arena_bytes"],
        "state_bytes_host": firmware.info["state_bytes"], "state_bytes_device": run.memory.get("state_used_bytes"),
        "state_persistent_kernel_bytes_host": firmware.info["plan"].get("persistent_bytes"),
        "tflm_arena": {"recorded_64bit": tflm.recorded_total, "min_working_64bit": tflm.min_working_64bit,
                       "recorded_head": tflm.recorded_head, "recorded_tail_64bit": tflm.recorded_tail,
                       "estimated_32bit": tflm.estimated_32bit,
                       "reference_min_32bit_toolchain_md": TFLM_REFERENCE[name]["min_arena_32bit"]},
        "flash_bytes": firmware.info["flash_bytes"], "model_bytes": len(model),
        "code_bytes": firmware.info["flash"].get("code_and_rodata"),
        "stack_used_bytes": run.memory.get("stack_used_bytes"),
        "bit_exact_vs_builtin_ref": exact["value"], "differing_vs_builtin_ref": exact["differing_elements"],
        "differing_vs_tflm_python": (exact.get("vs_tflm_python") or {}).get("differing_elements"),
        "output_elements": exact["total_elements"], "matches": exact["matches"],
        "latency_ms_estimated": work["latency_ms_estimated"]["value"],
        "per_op_instructions": work.get("per_op_instructions"),
        "seconds": {"generate_and_build": round(build_s, 2), "qemu_run": round(run_s, 2)},
    }


def _cmp(ours: int, theirs: int) -> str:
    return "not larger" if ours <= theirs else f"LARGER by {ours - theirs:,} B"


def table(rows) -> str:
    head = ("model", "board", "instr/inference", "instr/MAC", "MACs", "arena (ours)", "TFLM head", "ours arena+state",
            "TFLM arena 64-bit",
            "TFLM 32-bit est.", "TFLM 32-bit real*", "flash", "bit-exact (diff ref/tflm)")
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        t = r["tflm_arena"]
        lines.append(" | ".join([
            r["model"], r["board"], f"{r['instructions_per_inference']:,}", f"{r['instructions_per_mac']:.2f}",
            f"{r['macs']:,}", f"{r['arena_bytes']:,}", f"{t['recorded_head']:,}",
            f"{r['arena_bytes'] + (r['state_bytes_device'] or 0):,}",
            f"{max(t['recorded_64bit'], t['min_working_64bit']):,}",
            f"{t['estimated_32bit']:,}", f"{t['reference_min_32bit_toolchain_md']:,}", f"{r['flash_bytes']:,}",
            f"{'yes' if r['bit_exact_vs_builtin_ref'] else 'NO'} ({r['differing_vs_builtin_ref']}/{r['differing_vs_tflm_python']}"
            f" of {r['output_elements']})",
        ]))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=REPO / "out" / "bench" / "firmware_mlperf.json")
    parser.add_argument("--samples", type=int, default=2, help="input samples per model (default 2)")
    args = parser.parse_args()
    folder = mlperf_dir()
    missing = [tool for tool in ("qemu-system-arm", "arm-none-eabi-gcc") if shutil.which(tool) is None]
    if not folder.is_dir() or missing:
        print(f"skipped: {'MLPerf Tiny models not found at ' + str(folder) if not folder.is_dir() else ''}"
              f"{' missing ' + ', '.join(missing) if missing else ''}")
        return 0
    from edgekit.provenance import host_info, tool_versions, utc_now

    rows = []
    for board in BOARDS:
        for name, file in MODELS.items():
            print(f"{name} on {board} ...", file=sys.stderr, flush=True)
            rows.append(bench_one(name, folder / file, board, args.samples))
    print(table(rows))
    print("\n* TFLM 32-bit real: smallest working arena of real TFLM on QEMU, quoted from ../shared/TOOLCHAIN.md. TFLM's "
          "arena holds activations AND its bookkeeping; ours keeps bookkeeping in a separate state buffer, so compare "
          "'ours arena+state' (device-reported 32-bit state) with it, and 'arena (ours)' with TFLM's planned head.")
    print("TFLM on mps2-an386 for reference (TOOLCHAIN.md): "
          + "; ".join(f"{n} {v['reference_kernels'] / 1e6:.2f} M (reference kernels), {v['cmsis_nn'] / 1e6:.2f} M (CMSIS-NN)"
                      for n, v in TFLM_REFERENCE.items())
          + f"; on mps3-an547 KWS with CMSIS-NN + Helium {TFLM_M55_KWS_CMSIS_HELIUM / 1e6:.2f} M.")
    m4 = [r for r in rows if r["board"] == "mps2-an386" and r["model"] in ("KWS", "IC")]
    for r in m4:
        verdict = "meets" if r["instructions_per_mac"] < TARGET_INSTR_PER_MAC_M4 else "misses"
        print(f"target < {TARGET_INSTR_PER_MAC_M4} instr/MAC on Cortex-M4: {r['model']} {r['instructions_per_mac']:.2f} ({verdict})")
    for r in rows:
        t = r["tflm_arena"]
        total = r["arena_bytes"] + (r["state_bytes_device"] or 0)
        real = t["reference_min_32bit_toolchain_md"]
        print(f"memory {r['model']} on {r['board']}: activations+scratch ours {r['arena_bytes']:,} B vs TFLM head "
              f"{t['recorded_head']:,} B ({_cmp(r['arena_bytes'], t['recorded_head'])}); runtime total (arena + 32-bit "
              f"state) ours {total:,} B vs TFLM's whole 32-bit arena {real:,} B ({_cmp(total, real)})")
    result = {"edgekit_bench": "firmware_mlperf", "rows": rows, "tflm_reference_toolchain_md": TFLM_REFERENCE,
              "tflm_m55_kws_cmsis_helium": TFLM_M55_KWS_CMSIS_HELIUM,
              "signature": {"tools": tool_versions(("edgekit", "numpy", "ai-edge-litert", "tflite-micro", "pyelftools")),
                            "host": host_info(), "created": utc_now()}}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
