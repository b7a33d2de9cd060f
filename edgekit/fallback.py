"""--fallback auto, format-independent: keep the most quantization-sensitive ops in float until parity is met.

A backend gives two callbacks and this module runs the search (no recalibration: the backend re-quantizes the
same calibrated model with a growing float set):

- ``build(plan, activations) -> Built``: the quantized model for a precision plan (backend object, runner,
  size, MACs in float, host latency);
- ``rank(candidate) -> [RankedOp]``: the ops of that model, most damaged first (the per-layer analysis), only
  ops that are still quantized and that the backend can keep in float.

Loop: 1. build and compare the starting plan with the float reference on the evaluation samples
(edgekit.parity.compare with the run's --min-* tolerance: the final report's metrics); 2. while it fails, try
the most damaged op not yet tried in float; it stays float only if parity improves by MIN_GAIN_DB (fewer failed
thresholds, or that much more worst-output SQNR), else it is reverted and the next-ranked op is tried; re-rank
after each kept op; at most MAX_STEPS tries. An optional ``unreachable(candidate)`` stop reason (checked after the
first ranking) ends the search at once when no float op can help. The model written is the first that passed,
else the best tried.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

from edgekit.calibration.dataset import Sample
from edgekit.parity.compare import ParityReport, compare
from edgekit.parity.runners import ModelRunner
from edgekit.parity.tolerance import Tolerance
from edgekit.report import fmt

log = logging.getLogger(__name__)

MAX_STEPS = 8              # ops tried in float before giving up
MIN_GAIN_DB = 0.2          # an op stays in float only if the worst output SQNR rises this much
ProgressFactory = Callable[[str, int], Callable[[int], None]]


@dataclass
class Built:
    """What a backend's build() returns for one precision plan."""

    result: Any                 # the backend's quantized model object (Int8Result, a file path, ...)
    runner: ModelRunner         # runs it for parity
    size_bytes: int
    float_ops: List[str]        # op ids (names) of the float model that run in float
    float_macs: int = 0
    latency_ms: Optional[float] = None


@dataclass(frozen=True)
class RankedOp:
    """One op the ranking offers to move to float."""

    op_id: str                  # what the plan takes (TFLite: output tensor name; ONNX: node name)
    description: str            # e.g. "CONV_2D 'name'" (the step label is "+ float <description>")
    local_sqnr_db: Optional[float] = None


@dataclass
class Candidate:
    """One quantized variant of the model and its parity."""

    label: str                  # "all int8", "+ float CONV_2D 'x'", "whole model 16x8"
    plan: Any                   # the backend's precision plan (None: a whole-model variant)
    activations: str            # int8 | int16
    result: Any                 # Built.result
    parity: ParityReport
    float_ops: List[str] = field(default_factory=list)
    float_macs: int = 0
    latency_ms: Optional[float] = None
    size: int = 0
    kept: bool = True           # False: tried in float, gained too little, reverted
    tried: Optional[str] = None # the op moved to float in this step

    def score(self) -> tuple:
        """Fewer failed thresholds first, then the worst output SQNR."""
        return (len(self.parity.failures), -worst_sqnr(self))

    def to_json(self) -> dict:
        return {
            "step": self.label,
            "kept": self.kept,
            "tried": self.tried,
            "activations": self.activations,
            "float_ops": self.float_ops,
            "passed": self.parity.passed,
            "failures": self.parity.failures,
            "outputs": [{k: getattr(o, k) for k in ("name", "sqnr_db", "cosine", "top1_agreement")}
                        for o in self.parity.outputs],
            "accuracy": self.parity.accuracy.to_dict() if self.parity.accuracy else None,
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
    stopped: str                # why the search ended
    latency_method: str = ""    # how host_latency_ms was measured (a sentence)
    unmet_hint: str = ""        # backend advice printed when the target was not met
    runtime_note: str = ""      # what the host latency does not tell (printed after the table)

    def to_json(self) -> dict:
        return {
            "met": self.met,
            "fallback_to": self.fallback_to,
            "tolerance": self.tolerance.to_json(),
            "stopped": self.stopped,
            "chosen": self.chosen.label,
            "total_macs": self.total_macs,
            "latency_method": self.latency_method,
            "steps": [c.to_json() for c in self.steps],
        }

    def markdown_lines(self) -> List[str]:
        verdict = "met" if self.met else "NOT met"
        lines = [
            "## Mixed precision (--fallback auto)",
            "",
            f"Target {thresholds(self.tolerance)}: **{verdict}** ({self.stopped}). "
            f"Chosen: **{self.chosen.label}** ({len(self.chosen.float_ops)} op(s) in float). Fallback to: {self.fallback_to}. "
            "Layers are ranked by the per-layer analysis (lowest local SQNR first) on the evaluation samples, the "
            f"same samples as the parity report; a layer tried in float stays only if it gains {MIN_GAIN_DB} dB.",
            "",
            "| step | change | kept | float ops | passed | worst SQNR dB | worst cosine | top-1 accuracy | size B | MACs in float | host latency ms |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for n, c in enumerate(self.steps):
            sqnr = min((o.sqnr_db for o in c.parity.outputs), default=float("nan"))
            cos = min((o.cosine for o in c.parity.outputs), default=float("nan"))
            share = f"{c.float_macs:,} ({c.float_macs / self.total_macs:.1%})" if self.total_macs else f"{c.float_macs:,}"
            latency = fmt(c.latency_ms) if c.latency_ms is not None else "–"
            acc = f"{c.parity.accuracy.candidate_top1:.2%}" if c.parity.accuracy else "–"
            kept = "yes" if c.kept else f"no (< {MIN_GAIN_DB} dB gain)"
            lines.append(f"| {n} | {c.label} | {kept} | {len(c.float_ops)} | {'yes' if c.parity.passed else 'no'} | "
                         f"{fmt(sqnr)} | {fmt(cos, 6)} | {acc} | {c.size:,} | {share} | {latency} |")
        lines += ["", f"Latency: {self.latency_method}" + (f"; {self.runtime_note}" if self.runtime_note else "") + ".", ""]
        if not self.met:
            lines += [f"The target was not met by any step; the model written is the best one tried ({self.chosen.label})."]
            if self.unmet_hint and not self.stopped.startswith("unreachable"):
                lines += [self.unmet_hint]
            lines += [""]
        return lines


def thresholds(tolerance: Tolerance) -> str:
    given = {k: v for k, v in tolerance.to_json().items() if v is not None}
    return ", ".join(f"{k} >= {v}" for k, v in given.items()) or "(none)"


def worst_sqnr(candidate: Candidate) -> float:
    return min((o.sqnr_db for o in candidate.parity.outputs), default=float("-inf"))


def improves(candidate: Candidate, best: Candidate) -> bool:
    """Keep an op in float only if it pays: fewer failed thresholds or MIN_GAIN_DB more worst-output SQNR."""
    if len(candidate.parity.failures) != len(best.parity.failures):
        return len(candidate.parity.failures) < len(best.parity.failures)
    return worst_sqnr(candidate) >= worst_sqnr(best) + MIN_GAIN_DB


def output_grid_limit(layers, candidate: Candidate, tolerance: Tolerance, advice: str) -> str:
    """A stop reason when the model's 8-bit output grid alone cannot reach --min-sqnr-db, else ''.

    ``layers`` is the candidate's per-layer report: the rows of the model outputs carry ``grid_sqnr_db``, the SQNR
    of the float output rounded onto the quantized output's grid. No op kept in float can beat that."""
    if tolerance.min_sqnr_db is None:
        return ""
    outputs = {o.name for o in candidate.parity.outputs}
    grids = [r["grid_sqnr_db"] for r in layers.rows
             if outputs & {r.get("tensor"), r.get("reference_tensor")} and r.get("grid_sqnr_db") is not None]
    if grids and min(grids) < tolerance.min_sqnr_db:
        return (f"unreachable with int8 outputs: the float output rounded onto the int8 output grid alone gives "
                f"{min(grids):.1f} dB < {tolerance.min_sqnr_db} dB; no layer in float can fix that ({advice})")
    return ""


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


class FallbackSearch:
    """Builds and compares candidates; ``steps`` is every candidate tried, in order."""

    def __init__(self, *, reference: ModelRunner, build: Callable[[Any, str], Built], samples: Sequence[Sample],
                 labels, tolerance: Tolerance, progress: ProgressFactory) -> None:
        self.reference = CachedRunner(reference)
        self.build, self.samples, self.labels = build, samples, labels
        self.tolerance, self.progress = tolerance, progress
        self.steps: List[Candidate] = []

    def evaluate(self, label: str, plan: Any, activations: str = "int8") -> Candidate:
        """Build ``plan``, compare it with the float reference, append it to the steps."""
        built = self.build(plan, activations)
        parity = compare(self.reference, built.runner, self.samples, tolerance=self.tolerance, labels=self.labels,
                         progress=self.progress(f"fallback {len(self.steps)}", len(self.samples)))
        candidate = Candidate(label, plan, activations, built.result, parity, list(built.float_ops), built.float_macs,
                              built.latency_ms, built.size_bytes)
        log.info("fallback step %d (%s): %s", len(self.steps), label, "passed" if parity.passed else "; ".join(parity.failures))
        self.steps.append(candidate)
        return candidate

    def greedy(self, best: Candidate, *, rank: Callable[[Candidate], List[RankedOp]],
               with_float: Callable[[Any, str], Any],
               unreachable: Optional[Callable[[Candidate], str]] = None) -> tuple:
        """Move ranked ops to float one at a time from ``best`` (which failed); returns (best, why it stopped)."""
        ranked = rank(best)
        stopped = (unreachable(best) if unreachable else "") or f"stopped after {MAX_STEPS} tries"
        if stopped.startswith("unreachable"):
            return best, stopped
        tried: set = set()
        while len(self.steps) <= MAX_STEPS:
            pick = next((r for r in ranked if r.op_id not in tried and r.op_id not in best.float_ops), None)
            if pick is None:
                return best, "no quantized layer left to try in float"
            tried.add(pick.op_id)
            damage = f" (local SQNR {fmt(pick.local_sqnr_db, 3)} dB)" if pick.local_sqnr_db is not None else ""
            candidate = self.evaluate(f"+ float {pick.description}{damage}", with_float(best.plan, pick.op_id))
            candidate.tried = pick.op_id
            candidate.kept = candidate.parity.passed or improves(candidate, best)
            if candidate.kept:
                best = candidate
            if candidate.parity.passed:
                return best, f"met with {len(best.float_ops)} layer(s) in float after {len(self.steps) - 1} tries"
            if candidate.kept:
                ranked = rank(best)
        return best, stopped

    def result(self, best: Candidate, stopped: str, *, fallback_to: str, total_macs: int, **text) -> FallbackResult:
        """The first candidate that passed, else ``best``."""
        passed = [c for c in self.steps if c.parity.passed]
        chosen = passed[0] if passed else best
        return FallbackResult(self.steps, chosen, bool(passed), fallback_to, total_macs, self.tolerance, stopped, **text)
