"""Is a calibration set representative of deployment data?

Compares the calibration set with a sample of live (deployment) inputs on the float model:
- per activation tensor: the calibrated range (the range method the quantizer would use on the
  calibration statistics, edgekit.calibration), the live range, and the exact share of live
  activation values outside the calibrated range (they would be clipped by the INT8 model);
- the model input's distribution per channel: mean/std/percentiles, Kolmogorov-Smirnov distance
  and Wasserstein-1 distance (in input-range units) between calibration and live values;
- optionally (``effect=True``) the consequence: the model quantized with the calibration ranges
  and with ranges from the live data, both run on the live data against the float model
  (top-1 agreement, SQNR, accuracy when labels exist).
Verdict: ``representative``, ``check`` or ``unrepresentative``, with the worst tensors.
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from edgekit.calibration import dataset as data
from edgekit.calibration.ranges import RangeOptions, choose_ranges
from edgekit.calibration.statistics import TensorStats, cache_key, collect_statistics
from edgekit.errors import CalibrationDataError
from edgekit.preprocessing.calib_result import (CalibCheckFile, CalibProvenance, CalibThresholds, CheckedModel,
                                                InputCheck, QuantizationEffect, SampleSet, TensorCheck)
from edgekit.preprocessing.live_sums import (ActivationSums, ChannelSums, HistogramSums, InputEdges, LiveSums,
                                             distances, input_sums)
from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.results import JsonObject
from edgekit.scale.ray_map import Execution

if TYPE_CHECKING:
    from edgekit.parity.result import ParityReport

log = logging.getLogger(__name__)

ProgressFactory = Callable[[str, int], Callable[[int], None]]


@dataclass
class LoadedSet:
    path: Path
    samples: List[List[np.ndarray]]
    names: List[str]
    labels: Optional[List[int]]
    errors: List[str]
    fingerprint: str
    spec: Optional[PreprocessSpec]


def load_tolerant(path: Path, inputs, spec: Optional[PreprocessSpec], *, limit: Optional[int], seed: int) -> LoadedSet:
    """Every readable sample of a source; unreadable files are named and counted, the rest go on."""
    source = data.open_source(Path(path), [i.name for i in inputs], spec)
    chosen = data.whole(source, limit=limit, seed=seed)
    samples, names, labels, errors = [], [], [], []
    digest = hashlib.sha256(source.kind.encode())
    for i in chosen.indices:
        try:
            sample = source.load(i)
        except CalibrationDataError as exc:
            errors.extend(exc.problems)
            continue
        problem = _check_sample(sample, inputs)
        if problem:
            errors.append(f"{source.name(i)}: {problem}")
            continue
        samples.append([np.asarray(a, dtype=spec_in.dtype) for a, spec_in in zip(sample, inputs)])
        names.append(source.name(i))
        if source.labels is not None:
            labels.append(source.labels[i])
        digest.update(source.digest(i))
    if not samples:
        raise CalibrationDataError(
            [f"no usable samples in {path}"] + errors[:10], fix="pass images/arrays that match the model input"
        )
    return LoadedSet(Path(path), samples, names, labels if source.labels is not None else None, errors,
                     digest.hexdigest(), getattr(source, "spec", None))


def _check_sample(sample, inputs) -> Optional[str]:
    if len(sample) != len(inputs):
        return f"{len(sample)} inputs, the model has {len(inputs)}"
    for array, spec in zip(sample, inputs):
        got, want = tuple(array.shape), tuple(spec.shape)
        if len(got) != len(want) or any(w > 0 and g != w for g, w in zip(got[1:], want[1:])):
            return f"shape {got[1:]} does not match model input {spec.name!r} {want[1:]}"
        if np.issubdtype(np.asarray(array).dtype, np.floating) and not np.all(np.isfinite(array)):
            return "contains NaN or Inf"
    return None


def clipped_counts(model, samples: Sequence[List[np.ndarray]], ranges: Dict[int, Tuple[float, float]],
                   progress: Optional[Callable[[int], None]] = None) -> Dict[int, Tuple[int, int, int]]:
    """Exact (below, above, total) counts of live values outside each calibrated range."""
    sums = ActivationSums.empty(list(ranges))
    for sample in samples:
        model.run(sample, kind="debug")
        sums.add(model.tensor_values(list(ranges)), ranges)
        if progress:
            progress(1)
    return {i: tuple(c) for i, c in sums.counts.items()}


def ks_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov statistic (max CDF gap) of two whole samples (the exact reference of
    the binned distance the report uses)."""
    a, b = np.sort(a), np.sort(b)
    grid = np.concatenate([a, b])
    return float(np.max(np.abs(np.searchsorted(a, grid, side="right") / a.size - np.searchsorted(b, grid, side="right") / b.size)))


def wasserstein(a: np.ndarray, b: np.ndarray, points: int = 512) -> float:
    """Wasserstein-1 distance between two whole samples (mean gap of their quantile functions)."""
    q = (np.arange(points) + 0.5) / points
    return float(np.mean(np.abs(np.quantile(a, q) - np.quantile(b, q))))


def input_distribution(calib: List[ChannelSums], live: List[ChannelSums], edges: InputEdges) -> List[InputCheck]:
    """Per input channel: statistics and distances between calibration and live input values."""
    return [{"channel": name, **distances(c, l)} for name, c, l in zip(edges.channel_names(), calib, live)]


@dataclass
class CalibCheckReport:
    """The check as the command builds and renders it; ``result()`` is the typed calib_check.json."""

    model: CheckedModel
    calib: SampleSet
    live: SampleSet
    method: str
    thresholds: CalibThresholds
    tensors: List[TensorCheck]
    inputs: List[InputCheck]
    verdict: str
    reasons: List[str]
    effect: Optional[QuantizationEffect] = None
    errors: Dict[str, List[str]] = field(default_factory=dict)
    execution: Optional[Execution] = None  # engine, workers, samples/s, wall time of the live-data passes

    @property
    def passed(self) -> bool:
        return self.verdict != "unrepresentative"

    def worst(self, n: int = 5) -> List[TensorCheck]:
        return sorted(self.tensors, key=lambda t: -t["clipped"])[:n]

    def result(self, provenance: CalibProvenance) -> CalibCheckFile:
        """The typed calib_check.json."""
        from edgekit.report import json_safe

        # json_safe: numpy scalars become Python numbers (inf / nan are read back by the Number fields)
        return CalibCheckFile.model_validate(json_safe({**self.to_json(), "provenance": provenance}))

    def to_json(self) -> JsonObject:
        """The document without its provenance, as plain data."""
        return {
            "verdict": self.verdict, "passed": self.passed, "reasons": self.reasons,
            "thresholds": self.thresholds.to_json(), "method": self.method,
            "model": self.model, "calib": self.calib, "live": self.live,
            "worst_tensors": [t["name"] for t in self.worst()],
            "inputs": self.inputs, "tensors": self.tensors, "effect": self.effect, "errors": self.errors,
            "execution": self.execution,
        }


def _verdict(tensors: List[TensorCheck], inputs: List[InputCheck], t: CalibThresholds) -> Tuple[str, List[str]]:
    worst = max(tensors, key=lambda x: x["clipped"])
    reasons = []
    verdict = "representative"
    if worst["clipped"] > t.max_clipped:
        verdict = "unrepresentative"
        reasons.append(f"{worst['clipped']:.2%} of live values of tensor {worst['name']!r} fall outside its calibrated range "
                       f"[{worst['range'][0]:.4g}, {worst['range'][1]:.4g}] (live [{worst['live_min']:.4g}, {worst['live_max']:.4g}]; "
                       f"limit {t.max_clipped:.2%})")
    elif worst["clipped"] > t.warn_clipped:
        verdict = "check"
        reasons.append(f"{worst['clipped']:.3%} of live values of tensor {worst['name']!r} would be clipped (warning above {t.warn_clipped:.2%})")
    far = [i for i in inputs if i["ks"] > t.max_input_ks]
    if far:
        verdict = "unrepresentative"
        i = max(far, key=lambda x: x["ks"])
        reasons.append(f"input channel {i['channel']}: calibration and live values differ (KS {i['ks']:.3f} > {t.max_input_ks}; "
                       f"mean {i['calib']['mean']:.4g} vs {i['live']['mean']:.4g})")
    if not reasons:
        reasons.append(f"at most {worst['clipped']:.3%} of live values fall outside the calibrated ranges; inputs alike "
                       f"(max KS {max(i['ks'] for i in inputs):.3f})")
    return verdict, reasons


Evaluate = Callable[[bytes, str], "ParityReport"]  # (int8 .tflite, label) -> float vs it on the live data


def quantization_effect(float_model, calib_stats, live_stats, method: str, options: RangeOptions,
                        evaluate: Evaluate) -> QuantizationEffect:
    """INT8 with calibration ranges vs INT8 with live ranges, both against float on the live data."""
    from edgekit.converters import load_backends
    from edgekit.provenance import sha256_bytes

    converter = load_backends().get("tflite")()
    support = converter.check_support(float_model)
    if not support.ok:
        return {"available": False, "reason": "the model cannot be quantized to int8 TFLite: "
                + "; ".join(op.describe() for op in support.rejected)}
    out: QuantizationEffect = {"available": True}
    for label, stats in (("with_calibration_set", calib_stats), ("with_live_data", live_stats)):
        result = converter.convert(float_model, choose_ranges(stats, method, options))
        report = evaluate(result.tflite, label)
        out["samples"] = report.samples
        entry = {"sha256": sha256_bytes(result.tflite), "outputs": [o.model_dump() for o in report.outputs]}
        if report.accuracy:
            entry["accuracy"] = report.accuracy.model_dump()
        out[label] = entry
    return out


def _evaluate_here(float_model, live: LoadedSet) -> Evaluate:
    from edgekit.parity.compare import compare
    from edgekit.parity.runners import TFLiteRunner
    from edgekit.parity.tolerance import Tolerance
    from edgekit.provenance import sha256_bytes
    from edgekit.tflite_model import TFLiteModel

    reference = TFLiteRunner(float_model, kernels="optimized", sha256=sha256_bytes(float_model.data))

    def evaluate(data: bytes, label: str):
        candidate = TFLiteRunner(TFLiteModel(data, source=f"int8 ({label})"), kernels="optimized", sha256=sha256_bytes(data))
        return compare(reference, candidate, live.samples, tolerance=Tolerance(), labels=live.labels)

    return evaluate


@dataclass
class LiveResult:
    """What calib-check learnt from the live data, however it was read (here or on Ray)."""

    sums: LiveSums
    stats: Optional[Dict[int, TensorStats]]  # --effect: statistics of the live activations
    info: SampleSet
    errors: List[str]
    execution: Execution
    effect: Optional[QuantizationEffect] = None


def live_here(float_model, path: Path, inputs, spec, *, limit, seed, edges: InputEdges, ranges, names: Dict[int, str],
              effect_of: Optional[Callable[[Dict[int, TensorStats], Evaluate], QuantizationEffect]],
              progress: ProgressFactory) -> LiveResult:
    """The live passes in this process over the loaded samples (pass 2 only with --effect)."""
    import time

    from edgekit.scale.ray_map import execution

    live_set = load_tolerant(path, inputs, spec, limit=limit, seed=seed)
    t0 = time.perf_counter()
    sums = LiveSums.empty(edges, list(names))
    step = progress("live data", len(live_set.samples) * (2 if effect_of else 1))
    for sample in live_set.samples:
        sums.add_sample(float_model, sample, edges, ranges)
        step(1)
    stats = None
    if effect_of is not None:
        hists = HistogramSums.empty({i: tuple(sums.activations.minmax[i]) for i in names})
        for sample in live_set.samples:
            hists.add_sample(float_model, sample)
            step(1)
        stats = hists.stats(names)
    wall = time.perf_counter() - t0
    info: SampleSet = {"path": str(path), "samples": len(live_set.samples), "fingerprint": live_set.fingerprint,
            "skipped": len(live_set.errors), "spec": live_set.spec.to_dict() if live_set.spec else None}
    result = LiveResult(sums, stats, info, live_set.errors, execution(None, len(live_set.samples), wall))
    if effect_of is not None:
        result.effect = effect_of(stats, _evaluate_here(float_model, live_set))
    return result


def calib_check(
    model: str, calib: Path, live: Path, *, spec: Optional[PreprocessSpec] = None, method: str = "minmax",
    range_options: RangeOptions = RangeOptions(), limit: Optional[int] = None, seed: int = 0,
    thresholds: CalibThresholds = CalibThresholds(), effect: bool = False,
    progress: Optional[ProgressFactory] = None, scale=None, chunk: Optional[int] = None, column: Optional[str] = None,
) -> CalibCheckReport:
    """Compare a calibration set with live data on ``model`` (any model edgekit can export to float).

    ``scale`` (edgekit.scale.ray_parity.RaySettings): the live data is listed and read in chunks on Ray Data
    (``chunk`` samples each; ``column`` for Parquet); the result is the same as in one process.
    """
    from edgekit.calibration.ranges import RANGE_METHODS
    from edgekit.export import to_float_tflite
    from edgekit.provenance import sha256_bytes, sha256_file
    from edgekit.tflite_model import TFLiteModel

    RANGE_METHODS.get(method)
    progress = progress or (lambda label, total: (lambda n: None))
    if scale is not None and scale.address is not None:
        from edgekit.scale.ray_parity import check_reachable

        check_reachable(scale.address)  # before any work: an unreachable cluster fails in seconds
    exporting = progress("exporting", 1)  # a Keras / PyTorch conversion can take tens of seconds
    exported = to_float_tflite(model)
    exporting(1)
    float_model = TFLiteModel(exported.tflite, source=f"{model} (float)")
    inputs = float_model.input_specs()
    calib_set = load_tolerant(calib, inputs, spec, limit=None, seed=seed)
    sha = sha256_bytes(float_model.data)
    calib_stats = collect_statistics(float_model, calib_set.samples, key=cache_key(sha, calib_set.fingerprint),
                                     progress=progress("calib stats", 2 * len(calib_set.samples)))
    ranges = choose_ranges(calib_stats, method, range_options)
    names = {i: st.name for i, st in calib_stats.items()}
    layout = (spec or calib_set.spec).layout if (spec or calib_set.spec) else None
    edges = InputEdges.from_samples(calib_set.samples, layout)
    effect_of = None
    if effect:
        def effect_of(live_stats, evaluate):
            return quantization_effect(float_model, calib_stats, live_stats, method, range_options, evaluate)

    if scale is None:
        result = live_here(float_model, live, inputs, spec, limit=limit, seed=seed, edges=edges, ranges=ranges,
                           names=names, effect_of=effect_of, progress=progress)
    else:
        from edgekit.scale.ray_calib import live_on_ray

        result = live_on_ray(float_model, live, inputs, spec, limit=limit, seed=seed, edges=edges, ranges=ranges,
                             names=names, effect_of=effect_of, settings=scale, chunk=chunk, column=column,
                             progress=progress)
    sums = result.sums
    tensors: List[TensorCheck] = []
    for index in ranges:
        c = calib_stats[index]
        live_min, live_max = sums.activations.minmax[index]
        below, above, total = sums.activations.counts[index]
        lo, hi = ranges[index]
        span = (hi - lo) or 1.0
        tensors.append({
            "index": index, "name": c.name,
            "calib_min": c.min, "calib_max": c.max, "range": [lo, hi],
            "live_min": live_min, "live_max": live_max,
            "clipped": (below + above) / max(total, 1), "clipped_below": below / max(total, 1), "clipped_above": above / max(total, 1),
            "excess": max(0.0, lo - live_min, live_max - hi) / span,
        })
    inputs_dist = input_distribution(input_sums(calib_set.samples, edges), sums.inputs, edges)
    verdict, reasons = _verdict(tensors, inputs_dist, thresholds)
    model_path = Path(model)
    report = CalibCheckReport(
        model={"path": model, "sha256": sha256_file(model_path) if model_path.exists() else None,
               "float_sha256": sha, "export": exported.route},
        calib={"path": str(calib), "samples": len(calib_set.samples), "fingerprint": calib_set.fingerprint,
               "skipped": len(calib_set.errors), "spec": calib_set.spec.to_dict() if calib_set.spec else None},
        live=result.info,
        method=method, thresholds=thresholds, tensors=tensors, inputs=inputs_dist, verdict=verdict, reasons=reasons,
        errors={k: v for k, v in (("calib", calib_set.errors), ("live", result.errors)) if v},
        effect=result.effect, execution=result.execution,
    )
    return report
