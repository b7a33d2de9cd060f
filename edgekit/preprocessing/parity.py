"""Run a reference and a candidate pipeline over the same images and compare the model-input tensors.

Differences are measured per image and in aggregate: max/mean absolute difference and RMSE in
tensor units, the same in input LSB (one 0..255 pixel step through the spec's scale/std, or one
quantization step for int8/uint8 tensors), the share of elements off by more than 1 LSB, and PSNR
against the spec's value range. With a model: top-1 agreement, flip rate and output drift.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from edgekit.errors import UserError
from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.preprocessing.base import ImageReadError, Preprocessor, Result
from edgekit.preprocessing.parity_result import (Aggregate, ImageMetrics, ImagePrediction, ImageRow, ModelEffect,
                                                 ParityProvenance, PipelineDescription, PreprocessParityFile,
                                                 Thresholds)
from edgekit.preprocessing.sources import spec_of
from edgekit.results import JsonObject
from edgekit.scale.ray_map import Execution

log = logging.getLogger(__name__)


def squeeze_batch(array: np.ndarray) -> np.ndarray:
    """Drop leading batch dimensions of size 1 (a callable may return (1, C, H, W))."""
    array = np.asarray(array)
    while array.ndim > 3 and array.shape[0] == 1:
        array = array[0]
    return array


@dataclass
class Units:
    """How tensor differences become input LSB and PSNR: per-channel step, channel axis, peak."""

    step: Optional[np.ndarray]  # per channel; None when no spec is known
    channel_axis: int
    peak: float
    source: str

    @classmethod
    def for_spec(cls, spec: Optional[PreprocessSpec]) -> "Units":
        if spec is None:
            return cls(None, 0, math.nan, "no spec: tensor units only")
        axis = 0 if spec.layout == "NCHW" else -1
        if spec.quantized:
            return cls(np.ones(spec.channels), axis, 255.0, f"{spec.dtype} quantization steps")
        step = spec.value_step()
        return cls(step, axis, float(255.0 * step.max()), "input pixel steps (scale / std)")

    def lsb(self, diff: np.ndarray) -> Optional[np.ndarray]:
        if self.step is None or diff.ndim != 3 or diff.shape[self.channel_axis] != len(self.step):
            return None
        shape = [1, 1, 1]
        shape[self.channel_axis] = len(self.step)
        return np.abs(diff) / self.step.reshape(shape)


def psnr_db(mse: float, peak: float) -> float:
    if not math.isfinite(peak) or peak <= 0:
        return math.nan
    if mse == 0:
        return math.inf
    return 10.0 * math.log10(peak * peak / mse)


@dataclass
class ImageDiff:
    """One image: its status and the differences between the two tensors."""

    name: str
    status: str  # compared | shape_mismatch | reference_error | candidate_error | both_error
    reference_shape: Optional[List[int]] = None
    candidate_shape: Optional[List[int]] = None
    metrics: ImageMetrics = field(default_factory=lambda: ImageMetrics())
    errors: Dict[str, str] = field(default_factory=dict)
    model: Optional[ImagePrediction] = None

    def to_json(self) -> ImageRow:
        return ImageRow(**{k: v for k, v in self.__dict__.items() if v not in (None, {}, [])})


def image_metrics(ref: np.ndarray, cand: np.ndarray, units: Units) -> ImageMetrics:
    diff = cand.astype(np.float64) - ref.astype(np.float64)
    mse = float(np.mean(diff**2))
    out: ImageMetrics = {
        "max_abs": float(np.max(np.abs(diff))) if diff.size else 0.0,
        "mean_abs": float(np.mean(np.abs(diff))) if diff.size else 0.0,
        "rmse": math.sqrt(mse),
        "psnr_db": psnr_db(mse, units.peak),
        "identical": bool(np.array_equal(ref, cand)),
    }
    lsb = units.lsb(diff)
    if lsb is not None:
        out["max_abs_lsb"] = float(lsb.max()) if lsb.size else 0.0
        out["mean_abs_lsb"] = float(lsb.mean()) if lsb.size else 0.0
        out["over_1_lsb"] = float(np.mean(lsb > 1.0 + 1e-3)) if lsb.size else 0.0
    return out


def compare_tensors(
    names: Sequence[str], reference: Sequence[Result], candidate: Sequence[Result], units: Units
) -> List[ImageDiff]:
    """Per-image comparison of two lists of results (arrays or ImageReadError)."""
    diffs = []
    for name, r, c in zip(names, reference, candidate):
        r_err, c_err = isinstance(r, ImageReadError), isinstance(c, ImageReadError)
        if r_err or c_err:
            status = "both_error" if r_err and c_err else ("reference_error" if r_err else "candidate_error")
            errors = {}
            if r_err:
                errors["reference"] = r.reason
            if c_err:
                errors["candidate"] = c.reason
            diffs.append(ImageDiff(name, status, errors=errors))
            continue
        r, c = squeeze_batch(r), squeeze_batch(c)
        item = ImageDiff(name, "compared", list(r.shape), list(c.shape))
        if r.shape != c.shape:
            item.status = "shape_mismatch"
        else:
            item.metrics = image_metrics(r, c, units)
        diffs.append(item)
    return diffs


def aggregate(diffs: Sequence[ImageDiff], reference: Sequence[Result], candidate: Sequence[Result], units: Units) -> Aggregate:
    """Totals over every compared image (element-weighted means)."""
    from edgekit.preprocessing.parity_sums import PixelSums

    sums = PixelSums()
    for d, r, c in zip(diffs, reference, candidate):
        compared = d.status == "compared"
        sums.add(d, squeeze_batch(r) if compared else None, squeeze_batch(c) if compared else None, units)
    return sums.aggregate(units)


def check(aggregate_: Aggregate, model: Optional[ModelEffect], thresholds: Thresholds, diffs: Sequence[ImageDiff]) -> List[str]:
    """Human-readable failures (empty: passed)."""
    failures = []
    counts = aggregate_.get("status_counts", {})
    if counts.get("candidate_error"):
        failures.append(f"the candidate failed on {counts['candidate_error']} image(s) the reference read")
    if counts.get("reference_error"):
        failures.append(f"the reference failed on {counts['reference_error']} image(s) the candidate read")
    unreadable = [d.name for d in diffs if d.status == "both_error"]  # diffs may be a bounded list: count from counts
    n_unreadable = counts.get("both_error", 0)
    if n_unreadable > thresholds.allow_unreadable:
        shown = ", ".join(unreadable[:5]) + (f" and {n_unreadable - 5} more" if n_unreadable > 5 else "")
        failures.append(f"{n_unreadable} image(s) could not be read by either pipeline: {shown} "
                        f"(allowed: {thresholds.allow_unreadable}; pass --allow-unreadable {n_unreadable} to accept them)")
    if counts.get("shape_mismatch"):
        d = next(d for d in diffs if d.status == "shape_mismatch")
        failures.append(f"tensor shapes differ on {counts['shape_mismatch']} image(s), e.g. {d.name}: "
                        f"reference {tuple(d.reference_shape)} vs candidate {tuple(d.candidate_shape)}")
    if aggregate_.get("compared", 0) == 0:
        failures.append("no image could be compared")
        return failures
    gates = (
        ("mean_abs_lsb", thresholds.max_mean_abs_lsb, "<=", "LSB"),
        ("max_abs_lsb", thresholds.max_abs_lsb, "<=", "LSB"),
        ("mean_abs", thresholds.max_mean_abs, "<=", ""),
        ("psnr_db", thresholds.min_psnr_db, ">=", "dB"),
    )
    for key, limit, op, unit in gates:
        if limit is None or key not in aggregate_:
            continue
        value = aggregate_[key]
        ok = value <= limit if op == "<=" else value >= limit
        if not ok:
            failures.append(f"{key} = {value:.4g}{(' ' + unit) if unit else ''} (required {op} {limit})")
    if model and thresholds.max_flip_rate is not None and model.get("flip_rate") is not None:
        if model["flip_rate"] > thresholds.max_flip_rate:
            failures.append(f"flip_rate = {model['flip_rate']:.4g} ({model['flipped']} of {model['images']} predictions "
                            f"changed; required <= {thresholds.max_flip_rate})")
    return failures


@dataclass
class PreprocessParityReport:
    """The comparison as the command builds and renders it; ``result()`` is the typed parity.json."""

    reference: PipelineDescription
    candidate: PipelineDescription
    images: List[ImageDiff]
    aggregate: Aggregate
    thresholds: Thresholds
    units: str
    failures: List[str] = field(default_factory=list)
    model: Optional[ModelEffect] = None
    diagnosis: Optional[JsonObject] = None  # the search's own JSON (see PreprocessParityFile.diagnosis)
    execution: Optional[Execution] = None  # Ray runs: engine, workers, samples/s, wall time

    @property
    def passed(self) -> bool:
        return not self.failures

    def __bool__(self) -> bool:
        return self.passed

    def worst(self, n: int = 5) -> List[ImageDiff]:
        key = "mean_abs_lsb" if any("mean_abs_lsb" in d.metrics for d in self.images) else "mean_abs"
        compared = [d for d in self.images if d.status == "compared"]
        return sorted(compared, key=lambda d: -d.metrics.get(key, 0.0))[:n]

    def result(self, provenance: ParityProvenance) -> PreprocessParityFile:
        """The typed parity.json."""
        from edgekit.report import json_safe

        # json_safe: numpy scalars become Python numbers (inf / nan are read back by the Number fields)
        return PreprocessParityFile.model_validate(json_safe({**self.to_json(), "provenance": provenance}))

    def to_json(self) -> JsonObject:
        """The document without its provenance, as plain data."""
        return {
            "passed": self.passed,
            "failures": self.failures,
            "thresholds": self.thresholds.to_json(),
            "units": self.units,
            "aggregate": self.aggregate,
            "model": self.model,
            "diagnosis": self.diagnosis,
            "reference": self.reference,
            "candidate": self.candidate,
            "images": [d.to_json() for d in self.images],
            **({"execution": self.execution} if self.execution else {}),
        }


# ------------------------------------------------------------------ model
def open_model(path: Path):
    """A runner for any model edgekit reads: .tflite/.onnx directly, others via the float export."""
    from edgekit.errors import InvalidModelError
    from edgekit.export import to_float_tflite
    from edgekit.export.detect import detect_kind
    from edgekit.parity.runners import RUNNERS, TFLiteRunner, open_runner
    from edgekit.provenance import sha256_bytes
    from edgekit.tflite_model import TFLiteModel

    if not Path(path).exists():
        raise InvalidModelError(f"model {path} does not exist")
    if detect_kind(str(path)).value in RUNNERS:
        return open_runner(Path(path))
    exported = to_float_tflite(str(path))
    model = TFLiteModel(exported.tflite, source=f"{path} (float export: {exported.route})")
    return TFLiteRunner(model, sha256=sha256_bytes(exported.tflite))


def input_quantization(runner) -> Optional[Tuple[float, int]]:
    """(scale, zero_point) of a quantized TFLite model input, else None."""
    model = getattr(runner, "model", None)
    inputs = getattr(model, "inputs", None)
    if inputs and inputs[0].is_quantized:
        return float(inputs[0].scale), int(inputs[0].zero_point)
    return None


def read_labels(folder: Path) -> Optional[Dict[str, int]]:
    """{file name: class} from a labels.csv (header file,label) beside the images, if present."""
    from edgekit.calibration.labels import read_labels_csv

    path = Path(folder) / "labels.csv"
    if not Path(folder).is_dir() or not path.is_file():
        return None
    return read_labels_csv(path)


def check_model_input(runner, reference: np.ndarray, candidate: np.ndarray) -> None:
    """Both pipelines' tensors fit the model input (shape; integer tensors only for a quantized model)."""
    (spec,) = runner.input_specs()[:1]
    expected = tuple(d for d in spec.shape[1:])
    for label, tensor in (("reference", reference), ("candidate", candidate)):
        shape = tuple(squeeze_batch(tensor).shape)
        if len(shape) != len(expected) or any(e > 0 and e != s for e, s in zip(expected, shape)):
            raise UserError(f"the {label} pipeline gives tensors of shape {shape} but the model input "
                            f"{spec.name!r} is {tuple(spec.shape)}",
                            fix="check size, crop and layout in the spec against the model")
        if np.issubdtype(squeeze_batch(tensor).dtype, np.integer) and input_quantization(runner) is None:
            raise UserError(f"the {label} pipeline gives {squeeze_batch(tensor).dtype} tensors but the model "
                            f"input is float", fix="use dtype float32 in the spec, or an int8 model")


def model_effect(runner, names: Sequence[str], reference: Sequence[np.ndarray], candidate: Sequence[np.ndarray],
                 labels: Optional[Dict[str, int]] = None) -> Tuple[ModelEffect, Dict[str, Tuple[int, int]]]:
    """Run the model on both tensors of every image: flip rate, top-1 agreement, output drift; and each
    image's (reference, candidate) top-1 class for classification models."""
    from edgekit.parity.compare import is_classification
    from edgekit.parity.metrics import output_metrics

    check_model_input(runner, reference[0], candidate[0])
    ref_out, cand_out = [], []
    for r, c in zip(reference, candidate):
        ref_out.append(runner.run([squeeze_batch(r)[None]])[0])
        cand_out.append(runner.run([squeeze_batch(c)[None]])[0])
    outputs = []
    for k, name in enumerate(runner.output_names()):
        ro = np.stack([o[k] for o in ref_out])
        co = np.stack([o[k] for o in cand_out])
        outputs.append({"name": name, **output_metrics(ro, co, classification=is_classification(ro))})
    first_ref = np.stack([o[0] for o in ref_out])
    result: ModelEffect = {"model": runner.describe(), "images": len(names), "outputs": outputs}
    predictions: Dict[str, Tuple[int, int]] = {}
    if is_classification(first_ref):
        r_cls = first_ref.reshape(len(first_ref), -1).argmax(axis=1)
        c_cls = np.stack([o[0] for o in cand_out]).reshape(len(first_ref), -1).argmax(axis=1)
        flipped = [{"image": n, "reference": int(a), "candidate": int(b)} for n, a, b in zip(names, r_cls, c_cls) if a != b]
        result.update({
            "top1_agreement": float(np.mean(r_cls == c_cls)),
            "flip_rate": len(flipped) / len(names),
            "flipped": len(flipped),
            "flipped_images": flipped,
        })
        predictions = {n: (int(a), int(b)) for n, a, b in zip(names, r_cls, c_cls)}
        if labels and all(n in labels for n in names):
            from edgekit.calibration.labels import check_label_range

            y = np.array([labels[n] for n in names])
            check_label_range(y, int(first_ref.reshape(len(first_ref), -1).shape[1]), "labels.csv")
            result["accuracy"] = {"labels": len(y), "reference_top1": float(np.mean(r_cls == y)),
                                  "candidate_top1": float(np.mean(c_cls == y))}
    return result, predictions


# ------------------------------------------------------------------ the whole comparison
def run_parity(
    reference: Preprocessor,
    candidate: Preprocessor,
    images: Sequence[Path],
    *,
    thresholds: Thresholds = Thresholds(),
    model=None,
    diagnose: bool = True,
    labels: Optional[Dict[str, int]] = None,
    progress: Optional[Callable[[int], None]] = None,
) -> Tuple[PreprocessParityReport, List[Result], List[Result]]:
    """Both pipelines over ``images``; returns the report and the raw tensors (for plots)."""
    images = [Path(p) for p in images]
    names = [p.name for p in images]
    ref_results = reference.run_many(images)
    if progress:
        progress(len(images))
    cand_results = candidate.run_many(images)
    if progress:
        progress(len(images))
    units = Units.for_spec(spec_of(reference) or spec_of(candidate))
    diffs = compare_tensors(names, ref_results, cand_results, units)
    agg = aggregate(diffs, ref_results, cand_results, units)
    effect = None
    if model is not None:
        ok = [i for i, d in enumerate(diffs) if d.status == "compared"]
        if ok:
            effect, predictions = model_effect(model, [names[i] for i in ok], [ref_results[i] for i in ok],
                                               [cand_results[i] for i in ok], labels)
            for i in ok:
                pred = predictions.get(names[i])
                if pred:
                    diffs[i].model = {"reference_class": pred[0], "candidate_class": pred[1], "flipped": pred[0] != pred[1]}
    failures = check(agg, effect, thresholds, diffs)
    report = PreprocessParityReport(reference.describe(), candidate.describe(), diffs, agg, thresholds, units.source,
                                    failures, effect)
    if failures and diagnose:
        from edgekit.preprocessing.diagnose import diagnose as run_diagnosis

        report.diagnosis = run_diagnosis(reference, candidate, images, ref_results, cand_results, diffs)
    return report, ref_results, cand_results
