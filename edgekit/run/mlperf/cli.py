"""`edgekit mlperf-dataset` and the `edgekit run --harness mlperf-tiny` handler."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Dict

from edgekit.console import say
from edgekit.errors import UserError


def register(subparsers) -> Dict[str, Callable]:
    d = subparsers.add_parser("mlperf-dataset", help="MLPerf Tiny dataset folder (runner layout) from your inputs, "
                                                      "labelled by the host reference model")
    d.add_argument("model", type=Path, help="the int8 .tflite (or a harness firmware folder holding model.tflite)")
    d.add_argument("--task", required=True, choices=("kws", "ic", "vww", "ad"))
    d.add_argument("--inputs", type=Path, help=".npy of inputs (kws: int8 or float features; ic/vww: uint8 or [0,1] "
                                               "images; ad: float32 (N, frames, 128)); default: seeded synthetic")
    d.add_argument("-n", "--count", type=int, default=20, help="synthetic inputs to write (default 20)")
    d.add_argument("--frames", type=int, default=16, help="ad: spectrogram frames per synthetic file (default 16)")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("-o", "--outdir", type=Path, default=Path("out/mlperf-datasets"),
                   help="writes OUTDIR/<model id>/ (default out/mlperf-datasets)")
    return {"mlperf-dataset": cmd_dataset}


def cmd_dataset(args) -> int:
    import numpy as np

    from edgekit.firmware.generate import load_model_bytes
    from edgekit.run.mlperf.dataset import LABEL_SOURCE, generate_dataset

    model, _ = load_model_bytes(args.model)
    inputs = None
    if args.inputs is not None:
        try:
            inputs = np.load(args.inputs, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read --inputs {args.inputs}: {exc}", fix="pass a .npy array") from exc
    dataset = generate_dataset(model, args.task, args.outdir, inputs=inputs, count=args.count, seed=args.seed,
                               frames=args.frames)
    say(f"wrote {len(dataset.entries)} files and y_labels.csv to {dataset.folder}")
    say(f"note: {LABEL_SOURCE}")
    return 0


def cmd_run_harness(args) -> int:
    from edgekit.progress import progress_bars
    from edgekit.run.mlperf.harness import run_harness

    with progress_bars(sys.stderr.isatty()) as progress:
        bar = progress("mlperf-tiny", None)
        run = run_harness(args.artifact, args.device, args.mode, args.outdir, dataset_dir=args.dataset,
                          min_runtime_s=args.min_runtime, timeout_s=args.timeout,
                          count_instructions=args.count_instructions, progress=lambda: bar(1))
    s = run.summary
    if run.mode == "performance":
        say(f"median throughput {s.median_throughput_inf_per_s:.3f} inf./sec. over {s.inputs} inputs, latency "
              f"{s.latency_ms:.3f} ms (measured from the device's m-lap-us: {run.app['timer_source']})")
        if s.instructions_per_inference:
            say(f"instructions per inference: {s.instructions_per_inference.median:,} (exact, QEMU plugin)")
        if not s.mlperf_runtime_met:
            say(f"note: runs shorter than 10 s (--min-runtime {s.min_runtime_s:g}): not a valid MLPerf Tiny result")
    else:
        auc = f"AUC {s.auc:.3f}" if s.auc is not None else "AUC undefined (a class has no file)"
        if run.task.name == "ad":
            say(f"{auc} over {s.files} files ({s.windows} windows); the runner's accuracy, best (precision + recall)"
                f" / 2: {100 * (s.top1 or 0.0):.1f}% (the reference runner's metrics)")
        else:
            say(f"top-1 {100 * (s.top1 or 0.0):.1f}% over {s.files} files, {auc} (the reference runner's metrics)")
        if s.labels_note:
            say(f"note: {s.labels_note}")
        be = run.bit_exact
        if be is not None and be.value is not None:
            say(f"device outputs vs LiteRT BUILTIN_REF: {'bit-exact' if be.value else 'DIFFER'} "
                  f"({be.differing_elements} of {be.total_elements} elements differ)")
    say(f"wrote {args.outdir}/results.txt, run.json, log.txt")
    return 0
