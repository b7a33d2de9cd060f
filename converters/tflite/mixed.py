"""--fallback auto for TFLite: the TFLite parts of the search in edgekit/fallback.py.

The generic loop (rank -> try the most damaged op in float -> keep it only if parity improves -> re-rank) is
edgekit.fallback; this module gives it what is TFLite's: build (re-quantize the one calibrated flatbuffer with the
plan), rank (edgekit.parity.layers.per_layer_report on LiteRT), MACs per op, host latency on LiteRT, and two
TFLite rules:
  - it stops at once when --min-sqnr-db is above what the int8 output grid alone allows (the float output rounded
    onto the model's int8 output scale): no float layer can fix that;
  - with --fallback-to int16 the one fallback step is the whole model in 16x8 (int16 activations, int8 weights):
    TF's 16x8 quantizer has no per-op selection (see int8.py).

Each step records parity, model size, MACs run in float and the host latency measured with LiteRT
(BUILTIN kernels without delegates, 1 thread) — a host figure, not a microcontroller one.
"""
from __future__ import annotations

import logging
import statistics
import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from edgekit.calibration.dataset import Sample
from edgekit.fallback import (MAX_STEPS, MIN_GAIN_DB, Built, Candidate, FallbackResult, FallbackSearch, RankedOp,
                             output_grid_limit)
from edgekit.parity.runners import ModelRunner, TFLiteRunner
from edgekit.parity.tolerance import Tolerance
from edgekit.tflite_model import TFLiteModel

from .precision import FLOAT, ModelOp, PrecisionPlan

log = logging.getLogger(__name__)

__all__ = ["auto_fallback", "op_macs", "host_latency_ms", "MAX_STEPS", "MIN_GAIN_DB", "Candidate", "FallbackResult"]

LATENCY_RUNS = 30          # timed invokes per model (after 3 warm-up runs)
LATENCY_LABEL = "measured on this host: LiteRT BUILTIN kernels (no delegates), 1 thread, median of {n} runs"
RUNTIME_NOTE = "microcontroller cost differs (float ops there run in software floating point or not at all)"
UNMET_HINT = ("When no single layer stands out, the rounding error is spread over many layers' activations: "
              "try the whole model in 16x8 (`--fallback-to int16`, or `--activations int16`).")
GRID_ADVICE = "--fallback-to int16 gives int16 outputs"
ProgressFactory = Callable[[str, int], Callable[[int], None]]


def op_macs(model: TFLiteModel) -> Dict[int, int]:
    """Multiply-accumulates per op index (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV, BATCH_MATMUL)."""
    macs: Dict[int, int] = {}
    for op in model.ops:
        if not op.outputs or op.outputs[0] < 0 or len(op.inputs) < 2 or op.inputs[1] < 0:
            continue
        out = model.tensor(op.outputs[0]).shape
        weight = model.tensor(op.inputs[1]).shape
        n_out = int(np.prod([max(d, 1) for d in out]))
        if op.name in ("CONV_2D", "TRANSPOSE_CONV") and len(weight) == 4:  # OHWI
            macs[op.index] = n_out * int(np.prod(weight[1:]))
        elif op.name == "DEPTHWISE_CONV_2D" and len(weight) == 4:  # 1HWC
            macs[op.index] = n_out * int(weight[1] * weight[2])
        elif op.name in ("FULLY_CONNECTED", "BATCH_MATMUL") and len(weight) >= 2:
            macs[op.index] = n_out * int(weight[-1] if op.name == "FULLY_CONNECTED" else weight[-2])
    return macs


def host_latency_ms(tflite: bytes, sample: Sample, runs: int = LATENCY_RUNS) -> float:
    """Median invoke time on this host (LiteRT BUILTIN kernels, no delegates, 1 thread)."""
    model = TFLiteModel(tflite)
    for _ in range(3):
        model.run(sample, kind="plain")
    interp = model.interpreter("plain")
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        interp.invoke()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def auto_fallback(
    *,
    ops: Sequence[ModelOp],
    float_model: TFLiteModel,
    reference: ModelRunner,
    plan: PrecisionPlan,
    build: Callable[[Optional[PrecisionPlan], str], object],
    samples: Sequence[Sample],
    labels,
    tolerance: Tolerance,
    fallback_to: str,
    progress: ProgressFactory,
) -> FallbackResult:
    """Search the plan; ``build(plan, activations)`` quantizes the calibrated model (an Int8Result)."""
    from edgekit.parity.layers import per_layer_report

    macs = op_macs(float_model)
    by_name = {o.tensor: o for o in ops}

    def built(candidate_plan: Optional[PrecisionPlan], activations: str) -> Built:
        result = build(candidate_plan, activations)
        floats = [] if candidate_plan is None else [p.tensor for p in candidate_plan.resolve(ops) if p.precision == FLOAT]
        return Built(result, TFLiteRunner(TFLiteModel(result.tflite), kernels="optimized"), len(result.tflite), floats,
                     sum(macs.get(by_name[n].index, 0) for n in floats if n in by_name),
                     host_latency_ms(result.tflite, samples[0]))

    layers = []  # the latest per-layer report (the output-grid check reads it)

    def rank(candidate: Candidate) -> List[RankedOp]:
        report = per_layer_report(float_model, TFLiteModel(candidate.result.tflite), samples, progress=progress, max_samples=64)
        layers[:] = [report]
        return _rankable(report.ranked(), by_name)

    search = FallbackSearch(reference=reference, build=built, samples=samples, labels=labels, tolerance=tolerance,
                            progress=progress)
    best = search.evaluate("all int8" if not plan.mixed else "int8 + --keep-float", plan, "int8")
    stopped = "the first model met the target"
    if not best.parity.passed and fallback_to == "int16":
        search.evaluate("whole model 16x8", None, "int16")
        stopped = "16x8 met the target" if search.steps[-1].parity.passed else "16x8 is whole-model only: one step"
        best = min(search.steps, key=Candidate.score)
    elif not best.parity.passed:
        best, stopped = search.greedy(best, rank=rank, with_float=lambda p, name: p.with_fallback(name),
                                      unreachable=lambda c: output_grid_limit(layers[0], c, tolerance, GRID_ADVICE))
    return search.result(best, stopped, fallback_to=fallback_to, total_macs=sum(macs.values()),
                         latency_method=LATENCY_LABEL.format(n=LATENCY_RUNS), runtime_note=RUNTIME_NOTE,
                         unmet_hint=UNMET_HINT if fallback_to == "float" else "")


def _rankable(ranked: Sequence[dict], by_name: Dict[str, ModelOp]) -> List[RankedOp]:
    """Ranked rows (most damaged first) that are quantized ops of the float model (not QUANTIZE/DEQUANTIZE)."""
    picks = []
    for row in ranked:
        name = row.get("reference_tensor") or row.get("tensor")
        if row.get("scale") == "float" or row.get("match") in ("inserted", "unmatched"):
            continue
        if name not in by_name or by_name[name].op in ("QUANTIZE", "DEQUANTIZE"):
            continue
        picks.append(RankedOp(name, f"{by_name[name].op} '{name}'", row.get("local_sqnr_db")))
    return picks
