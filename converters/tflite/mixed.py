"""--fallback auto: keep the most quantization-sensitive layers out of int8 until parity is met.

Loop (no recalibration: every step re-quantizes the same calibrated flatbuffer):
  1. quantize with the current plan, compare with the float reference on the evaluation samples
     (edgekit.parity.compare with the run's --min-* tolerance: the final report's metrics);
  2. if it fails, rank the layers of that model (edgekit.parity.layers.per_layer_report) and try
     the most damaged op still in int8 in float; it stays float only if parity gets better by
     MIN_GAIN_DB (else it is reverted and the next-ranked op is tried); re-rank after each kept
     layer; at most MAX_STEPS tries.
  Stops at once when --min-sqnr-db is above what the int8 output grid alone allows (the float
  output rounded onto the model's int8 output scale): no float layer can fix that.
With --fallback-to int16 the one fallback step is the whole model in 16x8 (int16 activations,
int8 weights): TF's 16x8 quantizer has no per-op selection (see int8.py).

Each step records parity, model size, MACs run in float and the host latency measured with LiteRT
(BUILTIN kernels without delegates, 1 thread) — a host figure, not a microcontroller one.
"""
from __future__ import annotations

import logging
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from edgekit.calibration.dataset import Sample
from edgekit.parity.compare import ParityReport, compare
from edgekit.parity.runners import ModelRunner, TFLiteRunner
from edgekit.parity.tolerance import Tolerance
from edgekit.report import fmt
from edgekit.tflite_model import TFLiteModel

from .precision import FLOAT, ModelOp, PrecisionPlan

log = logging.getLogger(__name__)

MAX_STEPS = 8              # layers tried in float before giving up
MIN_GAIN_DB = 0.2          # a layer stays in float only if the worst output SQNR rises this much
LATENCY_RUNS = 30          # timed invokes per model (after 3 warm-up runs)
LATENCY_LABEL = "measured on this host: LiteRT BUILTIN kernels (no delegates), 1 thread, median of {n} runs"
ProgressFactory = Callable[[str, int], Callable[[int], None]]


@dataclass
class Candidate:
    """One quantized variant of the model and its parity."""

    label: str                  # "all int8", "+ float CONV_2D 'x'", "whole model 16x8"
    plan: Optional[PrecisionPlan]
    activations: str            # int8 | int16
    result: object              # Int8Result
    parity: ParityReport
    float_ops: List[str] = field(default_factory=list)
    float_macs: int = 0
    latency_ms: Optional[float] = None
    kept: bool = True           # False: tried in float, gained too little, reverted
    tried: Optional[str] = None # the op moved to float in this step

    @property
    def size(self) -> int:
        return len(self.result.tflite)

    def score(self) -> tuple:
        """Fewer failed thresholds first, then the worst output SQNR."""
        sqnrs = [o.get("sqnr_db", float("-inf")) for o in self.parity.outputs]
        return (len(self.parity.failures), -min(sqnrs) if sqnrs else 0.0)

    def to_json(self) -> dict:
        return {
            "step": self.label,
            "kept": self.kept,
            "tried": self.tried,
            "activations": self.activations,
            "float_ops": self.float_ops,
            "passed": self.parity.passed,
            "failures": self.parity.failures,
            "outputs": [{k: o.get(k) for k in ("name", "sqnr_db", "cosine", "top1_agreement")} for o in self.parity.outputs],
            "accuracy": self.parity.accuracy,
            "size_bytes": self.size,
            "float_macs": self.float_macs,
            "host_latency_ms": self.latency_ms,
        }


@dataclass
class FallbackResult:
    steps: List[Candidate]
    chosen: Candidate
    met: bool
    fallback_to: str
    total_macs: int
    tolerance: Tolerance
    stopped: str               # why the search ended

    def to_json(self) -> dict:
        return {
            "met": self.met,
            "fallback_to": self.fallback_to,
            "tolerance": self.tolerance.to_json(),
            "stopped": self.stopped,
            "chosen": self.chosen.label,
            "total_macs": self.total_macs,
            "latency_method": LATENCY_LABEL.format(n=LATENCY_RUNS),
            "steps": [c.to_json() for c in self.steps],
        }

    def markdown_lines(self) -> List[str]:
        verdict = "met" if self.met else "NOT met"
        lines = [
            "## Mixed precision (--fallback auto)",
            "",
            f"Target {_thresholds(self.tolerance)}: **{verdict}** ({self.stopped}). "
            f"Chosen: **{self.chosen.label}** ({len(self.chosen.float_ops)} op(s) in float). Fallback to: {self.fallback_to}. "
            "Layers are ranked by the per-layer analysis (lowest local SQNR first) on the evaluation samples, the "
            f"same samples as the parity report; a layer tried in float stays only if it gains {MIN_GAIN_DB} dB.",
            "",
            "| step | change | kept | float ops | passed | worst SQNR dB | worst cosine | top-1 accuracy | size B | MACs in float | host latency ms |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for n, c in enumerate(self.steps):
            sqnr = min((o.get("sqnr_db", float("nan")) for o in c.parity.outputs), default=float("nan"))
            cos = min((o.get("cosine", float("nan")) for o in c.parity.outputs), default=float("nan"))
            share = f"{c.float_macs:,} ({c.float_macs / self.total_macs:.1%})" if self.total_macs else f"{c.float_macs:,}"
            latency = fmt(c.latency_ms) if c.latency_ms is not None else "–"
            acc = f"{c.parity.accuracy['candidate_top1']:.2%}" if c.parity.accuracy else "–"
            kept = "yes" if c.kept else f"no (< {MIN_GAIN_DB} dB gain)"
            lines.append(f"| {n} | {c.label} | {kept} | {len(c.float_ops)} | {'yes' if c.parity.passed else 'no'} | "
                         f"{fmt(sqnr)} | {fmt(cos, 6)} | {acc} | {c.size:,} | {share} | {latency} |")
        lines += ["", f"Latency: {LATENCY_LABEL.format(n=LATENCY_RUNS)}; microcontroller cost differs "
                      "(float ops there run in software floating point or not at all).", ""]
        if not self.met:
            lines += [f"The target was not met by any step; the model written is the best one tried ({self.chosen.label})."]
            if self.fallback_to == "float" and not self.stopped.startswith("unreachable"):
                lines += ["When no single layer stands out, the rounding error is spread over many layers' activations: "
                          "try the whole model in 16x8 (`--fallback-to int16`, or `--activations int16`)."]
            lines += [""]
        return lines


def _thresholds(tolerance: Tolerance) -> str:
    given = {k: v for k, v in tolerance.to_json().items() if v is not None}
    return ", ".join(f"{k} >= {v}" for k, v in given.items()) or "(none)"


class CachedRunner(ModelRunner):
    """The float reference run once per sample (the fallback compares it many times)."""

    def __init__(self, runner: ModelRunner) -> None:
        self.runner = runner
        self._cache: Dict[int, tuple] = {}

    def input_specs(self):
        return self.runner.input_specs()

    def output_names(self):
        return self.runner.output_names()

    def run(self, sample: Sample):
        key = id(sample)
        if key not in self._cache:
            self._cache[key] = (sample, self.runner.run(sample))  # keep the sample alive: ids stay unique
        return self._cache[key][1]

    def describe(self):
        return self.runner.describe()


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

    reference = CachedRunner(reference)
    macs = op_macs(float_model)
    total_macs = sum(macs.values())
    by_name = {o.tensor: o for o in ops}

    def evaluate(label: str, candidate_plan: Optional[PrecisionPlan], activations: str) -> Candidate:
        result = build(candidate_plan, activations)
        runner = TFLiteRunner(TFLiteModel(result.tflite, source=label), kernels="reference")
        parity = compare(reference, runner, samples, tolerance=tolerance, labels=labels,
                         progress=progress(f"fallback {len(steps)}", len(samples)))
        floats = [] if candidate_plan is None else [p.tensor for p in candidate_plan.resolve(ops) if p.precision == FLOAT]
        candidate = Candidate(label, candidate_plan, activations, result, parity, floats,
                              sum(macs.get(by_name[n].index, 0) for n in floats if n in by_name))
        candidate.latency_ms = host_latency_ms(result.tflite, samples[0])
        log.info("fallback step %d (%s): %s", len(steps), label, "passed" if parity.passed else "; ".join(parity.failures))
        return candidate

    steps: List[Candidate] = []
    steps.append(evaluate("all int8" if not plan.mixed else "int8 + --keep-float", plan, "int8"))
    best, stopped = steps[0], "the first model met the target"
    if not best.parity.passed and fallback_to == "int16":
        steps.append(evaluate("whole model 16x8", None, "int16"))
        stopped = "16x8 met the target" if steps[-1].parity.passed else "16x8 is whole-model only: one step"
        best = min(steps, key=Candidate.score)
    elif not best.parity.passed:
        layers = per_layer_report(float_model, TFLiteModel(best.result.tflite), samples, progress=progress, max_samples=64)
        stopped = _output_grid_limit(layers, best, tolerance) or f"stopped after {MAX_STEPS} tries"
        tried: set = set()
        while not stopped.startswith("unreachable") and len(steps) <= MAX_STEPS:
            pick = _most_damaged(layers.ranked(), by_name, set(best.float_ops) | tried)
            if pick is None:
                stopped = "no int8 layer left to try in float"
                break
            row, op = pick
            tried.add(op.tensor)
            damage = row.get("local_sqnr_db")
            label = f"+ float {op.op} '{op.tensor}'" + (f" (local SQNR {fmt(damage, 3)} dB)" if damage is not None else "")
            candidate = evaluate(label, best.plan.with_fallback(op.tensor), "int8")
            steps.append(candidate)
            candidate.tried = op.tensor
            candidate.kept = candidate.parity.passed or _improves(candidate, best)
            if candidate.kept:
                best = candidate
            if candidate.parity.passed:
                stopped = f"met with {len(best.float_ops)} layer(s) in float after {len(steps) - 1} tries"
                break
            if candidate.kept:
                layers = per_layer_report(float_model, TFLiteModel(best.result.tflite), samples, progress=progress, max_samples=64)
    passed = [c for c in steps if c.parity.passed]
    chosen = passed[0] if passed else best
    return FallbackResult(steps, chosen, bool(passed), fallback_to, total_macs, tolerance, stopped)


def worst_sqnr(candidate: Candidate) -> float:
    return min((o.get("sqnr_db", float("-inf")) for o in candidate.parity.outputs), default=float("-inf"))


def _improves(candidate: Candidate, best: Candidate) -> bool:
    """Keep a layer in float only if it pays: fewer failed thresholds or MIN_GAIN_DB more worst-output SQNR."""
    if len(candidate.parity.failures) != len(best.parity.failures):
        return len(candidate.parity.failures) < len(best.parity.failures)
    return worst_sqnr(candidate) >= worst_sqnr(best) + MIN_GAIN_DB


def _output_grid_limit(layers, candidate: Candidate, tolerance: Tolerance) -> str:
    """A stop reason when the int8 output grid alone cannot reach --min-sqnr-db (float layers cannot help), else ''."""
    if tolerance.min_sqnr_db is None:
        return ""
    outputs = {o["name"] for o in candidate.parity.outputs}
    grids = [r["grid_sqnr_db"] for r in layers.rows if r.get("tensor") in outputs and r.get("grid_sqnr_db") is not None]
    if grids and min(grids) < tolerance.min_sqnr_db:
        return (f"unreachable with int8 outputs: the float output rounded onto the int8 output grid alone gives "
                f"{min(grids):.1f} dB < {tolerance.min_sqnr_db} dB; no layer in float can fix that "
                "(--fallback-to int16 gives int16 outputs)")
    return ""


def _most_damaged(ranked: Sequence[dict], by_name: Dict[str, ModelOp], already: set):
    """The first ranked row (most damaged first) that is a quantized op of the float model not yet in float."""
    for row in ranked:
        name = row.get("reference_tensor") or row.get("tensor")
        if row.get("scale") == "float" or row.get("match") in ("inserted", "unmatched"):
            continue
        if name not in by_name or name in already or by_name[name].op in ("QUANTIZE", "DEQUANTIZE"):
            continue
        return row, by_name[name]
    return None

