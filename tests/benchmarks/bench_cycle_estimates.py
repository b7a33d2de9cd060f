#!/usr/bin/env python
"""Per-class cycle estimates of the MLPerf Tiny models next to published MLPerf Tiny latencies.

Each int8 model runs once on QEMU mps2-an386 (Cortex-M4F) with the ekcount plugin, which counts every executed
instruction by class (exact); edgekit.firmware.cycle_model turns the classes into cycles with the Cortex-M4 TRM
timings (an ESTIMATE: QEMU has no timing) and the latency at the NUCLEO-L4R5ZI's 120 MHz. The published figures are
MEASUREMENTS of another runtime (ST X-CUBE-AI 9.0 on a real NUCLEO-L4R5ZI at 120 MHz, MLPerf Tiny, as quoted in
edgekit's issue 28): the ratio compares an estimate against a measurement, not like with like, and says so.

    python tests/benchmarks/bench_cycle_estimates.py [--smoke] [--figures F]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _figures import FigureLog, bench_options  # noqa: E402

MODELS = REPO / "tests" / "fixtures" / "mlperf_tiny"
# ms per inference, X-CUBE-AI 9.0 on NUCLEO-L4R5ZI at 120 MHz (MLPerf Tiny; quoted, not re-measured here)
PUBLISHED_MS = {"kws": 43.2, "vww": 88.9, "ic": 165.0, "ad": 5.3}
PUBLISHED_SOURCE = "MLPerf Tiny, ST X-CUBE-AI 9.0 on NUCLEO-L4R5ZI at 120 MHz (measured by ST; quoted, not re-measured here)"
FILES = {"kws": "kws_ref_model_int8.tflite", "ic": "ic_resnet8_int8.tflite", "ad": "ad_autoencoder_int8.tflite"}


def model_bytes(task: str) -> bytes:
    if task == "vww":  # no MLPerf VWW weights here: the MobileNet-v1 0.25 96x96 architecture, seeded weights
        from tests.benchmarks.vww_model import vww_int8

        return vww_int8()
    return (MODELS / FILES[task]).read_bytes()


def estimate(task: str, work: Path):
    from edgekit.firmware.boards import load_board
    from edgekit.firmware.generate import generate_firmware
    from edgekit.firmware.qemu import QemuSession
    from edgekit.run.runners.mcu import cycle_estimate
    from edgekit.tflite_graph import read_graph

    data = model_bytes(task)
    model = work / f"{task}.tflite"
    model.write_bytes(data)
    result = generate_firmware(model, "mps2-an386", work / task, build=True)
    graph = read_graph(data)
    spec = graph.tensors[graph.inputs[0]]
    x = np.random.default_rng(0).integers(-128, 128, spec.shape, dtype=np.int8)
    with QemuSession(load_board("mps2-an386"), result.elf, count_instructions=True) as qemu:
        counted = qemu.infer([x])
    return counted.instructions, cycle_estimate(counted.instruction_classes, load_board("nucleo-l4r5zi").profile)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench_options(parser)
    parser.add_argument("--tasks", default="kws,vww,ic,ad", help="comma-separated MLPerf Tiny tasks")
    args = parser.parse_args(argv)
    tasks = ["ad"] if args.smoke else [t.strip() for t in args.tasks.split(",") if t.strip()]
    log = FigureLog("bench_cycle_estimates", smoke=args.smoke)
    log.note("cycles are ESTIMATED: exact per-class instruction counts (QEMU ekcount plugin, mps2-an386 build) x "
             "Cortex-M4 TRM timings at zero wait states; published latencies are measurements of X-CUBE-AI")
    print(f"{'task':5} {'instructions':>13} {'est. cycles':>12} {'CPI':>6} {'est. ms @120MHz':>16} "
          f"{'published ms':>13} {'est./published':>15}")
    with tempfile.TemporaryDirectory(prefix="ek-cycles-") as tmp:
        for task in tasks:
            instructions, est = estimate(task, Path(tmp))
            published = PUBLISHED_MS[task]
            print(f"{task:5} {instructions:13,} {est.cycles:12,.0f} {est.cycles_per_instruction:6.3f} "
                  f"{est.latency_ms:16.2f} {published:13.1f} {est.latency_ms / published:14.2f}x")
            source = f"{est.source}; board clock 120 MHz (nucleo-l4r5zi profile)"
            log.add(f"{task} instructions per inference", instructions, "instructions", method="count",
                    source="QEMU ekcount plugin, edgekit firmware for mps2-an386 (exact)")
            log.add(f"{task} cycles per inference", est.cycles, "cycles", method="estimated", source=source)
            log.add(f"{task} latency at 120 MHz", est.latency_ms, "ms", method="estimated", source=source)
            log.add(f"{task} published latency", published, "ms", method="quoted", source=PUBLISHED_SOURCE)
            log.add(f"{task} estimate / published", est.latency_ms / published, "x", method="estimated",
                    source="an estimate (edgekit runtime, cycle model) against a measurement (X-CUBE-AI, real board)")
    print("(estimate vs measurement: edgekit's runtime under a Cortex-M4 cycle model against X-CUBE-AI measured on "
          "the board; weight loads from flash wait states are not charged, so the estimate is a lower bound there)")
    log.write(args.figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
