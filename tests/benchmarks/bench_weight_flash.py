#!/usr/bin/env python
"""Flash of a prepared model per --weights mode (issue 29: <= 1.2x the int8 .tflite plus runtime code, Cortex-M4).

Per MLPerf Tiny model (KWS, IC, AD) and --weights mode (relaid: re-laid-out weight copies in the prepared blob, their
originals left out; int8: weights kept int8; auto, the default: the copies within a flash budget of 1.2x the
.tflite, chosen per op by estimated instructions saved per extra byte), on QEMU mps2-an386 (Cortex-M4F), --optimize balanced: the flash the
model takes (the compacted constants of the .tflite + the prepared blob, from the firmware's linker map) over the
.tflite's bytes, the runtime code, exact instructions per inference (ekcount plugin) and FULLY_CONNECTED's share of
them, and bit-exactness against LiteRT BUILTIN_REF.

    .venv/bin/python tests/benchmarks/bench_weight_flash.py [--models KWS,AD] [--samples N] [--figures F] [--smoke]

--smoke: host only (no firmware build, no QEMU): the same prepared blobs (host plans for the Cortex-M4) compacted
and run through the same C runtime on this host, bit-exact, flash ratio = (constants + blob) / .tflite.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, List

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from tests.benchmarks._figures import FigureLog, bench_options  # noqa: E402

MODELS = {"KWS": "kws_ref_model_int8.tflite", "IC": "ic_resnet8_int8.tflite", "AD": "ad_autoencoder_int8.tflite"}
WEIGHTS = ("relaid", "int8", "auto")
BOARD = "mps2-an386"
MODE = "balanced"
FLASH_LIMIT = 1.2  # issue 29
SEEDS = {"KWS": 1, "IC": 2, "AD": 3}


def reference(model: bytes, arrays: List[np.ndarray]) -> List[np.ndarray]:
    from ai_edge_litert import interpreter as litert

    interp = litert.Interpreter(model_content=model, num_threads=1,
                                experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    interp.allocate_tensors()
    for detail, x in zip(interp.get_input_details(), arrays):
        interp.set_tensor(detail["index"], x)
    interp.invoke()
    return [interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()]


def random_inputs(model: bytes, seed: int) -> List[np.ndarray]:
    from edgekit.tflite_graph import read_graph

    graph = read_graph(model)
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, size=graph.tensors[i].shape, dtype=np.int8) for i in graph.inputs]


def bench_host(name: str, model: bytes, weights: str) -> Dict[str, Any]:
    """The M4 host plan of this --weights mode, compacted and run on this host's build of the same C runtime."""
    from edgekit.firmware.constants import compact_constants, unread_constants
    from edgekit.firmware.host_runtime import HostRuntime
    from tests.firmware.test_constants import _runtime_over

    if weights == "auto":  # the per-op choice the firmware generator makes for the Cortex-M4 board
        from edgekit.firmware.boards import load_board
        from edgekit.firmware.generate import choose_memory_plan
        from edgekit.tflite_graph import read_graph

        plan = choose_memory_plan(model, read_graph(model), name, MODE, load_board(BOARD), weights)
        relaid = [r["op"] for r in plan["weight_layouts"].get("relaid_ops") or []]
        rt = HostRuntime(model, optimize=MODE, relaid_ops=relaid)
        assert rt.prepared["blob"] == plan["prepared_blob"]
    else:
        rt = HostRuntime(model, optimize=MODE, flash_layouts=weights == "relaid")
    c = compact_constants(model, rt.prepared["blob"])
    _runtime_over(model, rt, c.data, c.blob)
    x = random_inputs(model, SEEDS[name])
    exact = all(np.array_equal(a, b) for a, b in zip(rt.invoke(x), reference(model, x)))
    return {"model": name, "weights": weights, "board": "host", "tflite": len(model), "constants": len(c.data),
            "prepared": len(c.blob), "dropped": unread_constants(c.blob), "bit_exact": exact,
            "instructions": None, "fc_instructions": None, "runtime_code": None,
            "relaid_ops": len(relaid) if weights == "auto" else None,
            "budget": plan["weight_layouts"].get("flash_budget") if weights == "auto" else None}


def bench_device(name: str, model: bytes, weights: str, samples: int) -> Dict[str, Any]:
    """The firmware of this --weights mode on QEMU mps2-an386: linker-map flash, exact instructions, bit-exactness."""
    from edgekit.firmware.generate import cached_firmware
    from edgekit.run.base import RunRequest
    from edgekit.run.resolve import resolve_device
    from edgekit.run.runners.mcu import QemuRunner
    from edgekit.tflite_graph import read_graph

    graph = read_graph(model)
    rng = np.random.default_rng(SEEDS[name])
    inputs = [{graph.tensors[i].name: rng.integers(-128, 128, size=graph.tensors[i].shape, dtype=np.int8)
               for i in graph.inputs} for _ in range(samples)]
    fw = cached_firmware(model, BOARD, source=f"{name.lower()}.tflite", optimize=MODE, weights=weights)
    run = QemuRunner(resolve_device(f"qemu:{BOARD}")).run(
        RunRequest(artifact=fw.elf, inputs=inputs, iterations=samples, timeout_s=900))
    info, work = fw.info.to_dict(), run.work.present()
    split = info["flash"].get("split") or {}
    layouts = info["plan"]["weight_layouts"]
    fc = sum(e["instructions"] for e in work.get("per_op_instructions") or [] if e.get("op") == "FULLY_CONNECTED")
    return {"model": name, "weights": weights, "board": BOARD, "tflite": len(model), "constants": split.get("model"),
            "prepared": split.get("prepared"),
            "dropped": (layouts.get("originals_dropped"), layouts.get("originals_dropped_bytes")),
            "bit_exact": bool(work["outputs_bit_exact"]["value"]), "instructions": work["instructions_per_inference"],
            "fc_instructions": fc, "runtime_code": split.get("runtime_code"),
            "relaid_ops": len(layouts["relaid_ops"]) if "relaid_ops" in layouts else None,
            "budget": layouts.get("flash_budget")}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of " + ",".join(MODELS))
    parser.add_argument("--samples", type=int, default=2, help="input samples per firmware run (default 2)")
    bench_options(parser)
    args = parser.parse_args(argv)
    log = FigureLog("bench_weight_flash", smoke=args.smoke, argv=argv)
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    bad = [m for m in names if m not in MODELS]
    if bad:
        parser.error(f"unknown model(s) {', '.join(bad)}: use {', '.join(MODELS)}")
    device = not args.smoke
    if device and (shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None):
        print("skipped: qemu-system-arm or arm-none-eabi-gcc not installed (use --smoke for the host figures)")
        return 0
    where = f"QEMU {BOARD}, firmware linker map + ekcount plugin" if device else "host build of the C runtime"
    rows = []
    for name in names:
        path = REPO / "tests" / "fixtures" / "mlperf_tiny" / MODELS[name]
        model = path.read_bytes()
        for weights in WEIGHTS:
            row = bench_device(name, model, weights, args.samples) if device else bench_host(name, model, weights)
            rows.append(row)
            ratio = (row["constants"] + row["prepared"]) / row["tflite"]
            line = (f"{name} --weights {weights}: flash {row['constants']:,} B constants + {row['prepared']:,} B "
                    f"prepared = {ratio:.3f}x the {row['tflite']:,} B .tflite (measured, {where}; "
                    f"{'<=' if ratio <= FLASH_LIMIT else '>'} {FLASH_LIMIT}x); originals left out: "
                    f"{row['dropped'][0]} tensors, {row['dropped'][1]:,} B; bit-exact: {row['bit_exact']}")
            if row["relaid_ops"] is not None:
                line += f"; re-laid-out copies for {row['relaid_ops']} op(s) within the budget"
                if row["budget"]:
                    line += (f", {row['budget']['estimated_instructions_saved']:,} of the "
                             f"{row['budget']['estimated_instructions_saved_relaid']:,} instructions all copies save "
                             "(estimated)")
            if row["instructions"] is not None:
                line += (f"; {row['instructions']:,} instructions/inference, FULLY_CONNECTED {row['fc_instructions']:,}"
                         f"; runtime code {row['runtime_code']:,} B (measured)")
            print(line, flush=True)
            ctx = {"model": name, "weights": weights}
            log.add(f"{name} {weights} flash ratio", round(ratio, 4), "x .tflite", source=where, **ctx)
            log.add(f"{name} {weights} bit-exact", row["bit_exact"], "", source=f"{where} vs LiteRT BUILTIN_REF", **ctx)
            if row["instructions"] is not None:
                log.add(f"{name} {weights} instructions", row["instructions"], "per inference", source=where, **ctx)
                log.add(f"{name} {weights} FULLY_CONNECTED instructions", row["fc_instructions"], "per inference",
                        source=where, **ctx)
                log.add(f"{name} {weights} runtime code", row["runtime_code"], "B", source=where, **ctx)
    log.write(args.figures)
    return 0 if all(r["bit_exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
