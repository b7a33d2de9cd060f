#!/usr/bin/env python
"""Models x boards matrix (edgekit lab): 4 models x 4 QEMU boards, wall time with 1 vs 2 parallel places.

    .venv/bin/python tests/benchmarks/bench_lab_matrix.py [--smoke] [--figures F.json] [--out DIR]

Models: MLPerf Tiny AD, KWS and IC (int8, committed) and the demo digits CNN quantized once from its PyTorch
file with the committed calibration images. Boards: mps2-an386 (M4F), mps2-an500 (M7), mps2-an505 (M33),
mps3-an547 (M55). The firmware of every cell is built first (timed apart, into the firmware cache); then the same
matrix runs with 1 and with 2 cells at once into fresh folders. Prints wall times, the speed-up, and checks that
both runs give the same instructions and bit-exactness per cell. --smoke: the same code paths on 2 int8 models
(AD, KWS) x 2 boards (M4F, M7), 1 inference on 1 input per cell (16 firmware builds take minutes on 2 cores).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from tests.benchmarks._figures import FigureLog, bench_options  # noqa: E402

REPO = HERE.parents[1]
MLPERF = REPO / "tests" / "fixtures" / "mlperf_tiny"
BOARDS = ("mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_options(ap)
    ap.add_argument("--out", type=Path, help="keep the tables here (default: a temporary folder)")
    args = ap.parse_args(argv)
    log = FigureLog("bench_lab_matrix", smoke=args.smoke)

    from edgekit.lab.cells import Cell
    from edgekit.lab.matrix import BoardEntry, Matrix, ModelEntry
    from edgekit.lab.schedule import prebuild, quantize_once, run_matrix
    from edgekit.lab.table import write_table

    out = args.out or Path(tempfile.mkdtemp(prefix="bench-lab-"))
    models = [ModelEntry("ad", MLPERF / "ad_autoencoder_int8.tflite"), ModelEntry("kws", MLPERF / "kws_ref_model_int8.tflite")]
    started = time.monotonic()
    if not args.smoke:
        digits = quantize_once(ModelEntry("digits", REPO / "edgekit" / "demo" / "digits_cnn.pt2",
                                          REPO / "calibration_data" / "digits" / "calib"), out)
        models += [ModelEntry("ic", MLPERF / "ic_resnet8_int8.tflite"), ModelEntry("digits", Path(digits["int8"]))]
    quantize_s = time.monotonic() - started
    boards = [BoardEntry(b, "qemu", b) for b in (BOARDS[:2] if args.smoke else BOARDS)]
    iterations, inputs = (1, 1) if args.smoke else (5, 4)
    matrix = Matrix(models, boards, iterations=iterations, inputs=inputs, parallel=1)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=2) as pool:
        errors = [e for e in pool.map(prebuild, [Cell(m, b, m.model) for m in models for b in boards]) if e]
    build_s = time.monotonic() - started
    print(f"quantize digits once: {quantize_s:.1f} s (not in --smoke); build {len(models) * len(boards)} firmware (2 at once): "
          f"{build_s:.1f} s" + (f"; {len(errors)} build errors: {errors}" if errors else ""))
    if not args.smoke:
        log.add("quantize once (digits CNN, committed calibration images)", round(quantize_s, 2), "s",
                source="edgekit.lab.schedule.quantize_once -> edgekit quantize")
    log.add(f"firmware builds, {len(models)}x{len(boards)} cells, 2 at once", round(build_s, 2), "s",
            source="edgekit.firmware.generate.cached_firmware (arm-none-eabi-gcc, boot check in QEMU)")
    tables = {}
    for workers in (1, 2):
        table = run_matrix(matrix, out / f"parallel-{workers}", parallel=workers)
        write_table(out / f"parallel-{workers}", table)
        tables[workers] = table
        s = table.summary
        print(f"{workers} parallel place(s): run {table.timing.run_s:.1f} s for {s['cells']} cells "
              f"(ok {s['ok']}, does not fit {s['does-not-fit']}, failed {s['failed']})")
        log.add(f"matrix run wall time, {workers} parallel place(s)", table.timing.run_s, "s",
                source=f"edgekit.lab.schedule.run_matrix on {len(models)} models x {len(boards)} QEMU boards, "
                       f"{iterations} inference(s) on {inputs} input(s) per cell, firmware cached")
    speedup = tables[1].timing.run_s / max(tables[2].timing.run_s, 1e-9)
    print(f"speed-up 1 -> 2 parallel places: {speedup:.2f}x (efficiency {speedup / 2:.0%}) on this 2-core host")
    log.add("speed-up 1 -> 2 parallel places", round(speedup, 3), "x", source="ratio of the two run wall times")

    def key(table):
        return {(r["model"], r["board"]): (r["status"], r["instructions_per_inference"], r["bit_exact"])
                for r in table.cells}

    same = key(tables[1]) == key(tables[2])
    print(f"same instructions and bit-exactness per cell with 1 and 2 parallel places: {same}")
    for r in tables[2].cells:
        if r["instructions_per_inference"]:
            log.add(f"{r['model']} on {r['board']}: instructions per inference", r["instructions_per_inference"],
                    "instructions", method="count", source="QEMU TCG plugin (ekcount), exact")
    log.note(f"tables in {out}")
    log.write(args.figures)
    failed = sum(t.summary["failed"] for t in tables.values())
    return 0 if same and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
