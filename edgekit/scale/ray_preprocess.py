"""`preprocess-parity --images DIR --ray`: both pipelines (and the model) on Ray Data.

Each actor opens the reference and candidate pipelines (and the model) once, and turns a chunk of image
paths into ``PixelSums`` (tensor differences; edgekit.preprocessing.parity_sums) and, with a model,
``ParitySums`` (outputs on both tensors: drift, top-1 flips, accuracy). The driver merges them; the
per-image list is bounded (images with a problem and the worst compared ones), and the plot and the
diagnosis of a failure run here on that bounded list.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from edgekit.parity.streaming import TOP_K, ParitySums
from edgekit.preprocessing.parity import (PreprocessParityReport, Thresholds, Units, check, check_model_input,
                                          compare_tensors, input_quantization, squeeze_batch)
from edgekit.preprocessing.parity_result import ModelEffect
from edgekit.preprocessing.parity_sums import PixelSums
from edgekit.scale.ray_map import ChunkActor, execution, map_chunks, ray_session
from edgekit.scale.sources import DEFAULT_CHUNK

ModelRef = Tuple[str, object]  # ("path", "m.onnx") or ("tflite", bytes of the float export)


def _open_model(ref: ModelRef):
    from edgekit.parity.runners import TFLiteRunner, open_runner
    from edgekit.provenance import sha256_bytes
    from edgekit.tflite_model import TFLiteModel

    kind, value = ref
    if kind == "path":
        return open_runner(Path(value))
    return TFLiteRunner(TFLiteModel(value, source="float export (preprocess-parity worker)"), sha256=sha256_bytes(value))


def model_ref(path: Path, runner) -> ModelRef:
    """How a worker opens the model: by path when a runner reads the file, else the driver's float export."""
    from edgekit.export.detect import detect_kind
    from edgekit.parity.runners import RUNNERS

    if detect_kind(str(path)).value in RUNNERS:
        return ("path", str(path))
    return ("tflite", runner.model.data)


class PreprocessActor(ChunkActor):
    """Two pipelines and the model per actor; a chunk of (paths, labels) -> (PixelSums, ParitySums | None)."""

    def __init__(self, reference: str, candidate: str, python_path: Tuple[str, ...], quant, model: Optional[ModelRef]) -> None:
        from edgekit.preprocessing.sources import open_pipeline, spec_of

        paths = [Path(p) for p in python_path]
        self.reference = open_pipeline(reference, python_path=paths, input_quantization=quant)
        self.candidate = open_pipeline(candidate, python_path=paths, input_quantization=quant)
        self.units = Units.for_spec(spec_of(self.reference) or spec_of(self.candidate))
        self.runner = _open_model(model) if model is not None else None

    def process(self, chunk):
        paths, labels = [Path(p) for p in chunk[0]], chunk[1]
        refs, cands = self.reference.run_many(paths), self.candidate.run_many(paths)
        diffs = compare_tensors([p.name for p in paths], refs, cands, self.units)
        pixels = PixelSums()
        model = ParitySums.empty(len(self.runner.output_names()), TOP_K) if self.runner is not None else None
        for d, r, c, label in zip(diffs, refs, cands, labels):
            compared = d.status == "compared"
            if compared and model is not None:
                _run_model(self.runner, model, d, squeeze_batch(r), squeeze_batch(c), label)
            key = "mean_abs_lsb" if "mean_abs_lsb" in d.metrics else "mean_abs"
            pixels.add(d, squeeze_batch(r) if compared else None, squeeze_batch(c) if compared else None, self.units, key)
        return pixels, model


def _run_model(runner, sums: ParitySums, diff, r: np.ndarray, c: np.ndarray, label: Optional[int]) -> None:
    from edgekit.parity.compare import is_classification

    ro, rr = runner.run([r[None]])
    co, cr = runner.run([c[None]])
    flags = [is_classification(np.asarray(o)[None]) for o in ro]  # as model_effect decides on the stacked outputs
    sums.add_sample(diff.name, ro, co, rr, cr, flags, label)
    if flags[0]:
        a, b = int(np.asarray(ro[0]).argmax()), int(np.asarray(co[0]).argmax())
        diff.model = {"reference_class": a, "candidate_class": b, "flipped": a != b}


def model_result(runner, sums: ParitySums) -> ModelEffect:
    """The ``model`` section ``model_effect`` writes, from merged statistics (flipped images: the worst TOP_K)."""
    outputs = [{"name": n, **o.metrics(o.top1_samples > 0)} for n, o in zip(runner.output_names(), sums.outputs)]
    result: ModelEffect = {"model": runner.describe(), "images": sums.samples, "outputs": outputs}
    first = sums.outputs[0]
    if first.top1_samples and sums.samples:
        flipped = first.top1_samples - first.top1_equal
        result.update({
            "top1_agreement": first.top1_equal / first.top1_samples,
            "flip_rate": flipped / sums.samples,
            "flipped": flipped,
            "flipped_images": [{"image": e["sample"], "reference": e["reference_top1"], "candidate": e["candidate_top1"]}
                               for e in sums.flipped_samples()],
        })
        if sums.labelled and sums.labelled == sums.samples:
            result["accuracy"] = {"labels": sums.labelled, "reference_top1": sums.reference_correct / sums.labelled,
                                  "candidate_top1": sums.candidate_correct / sums.labelled}
    return result


def _validate_model(reference, candidate, runner, images: Sequence[Path], labels: Optional[Dict[str, int]]) -> None:
    """Before any worker starts: the first image both pipelines read fits the model, and labels fit its classes."""
    from edgekit.calibration.labels import check_label_range
    from edgekit.parity.compare import is_classification
    from edgekit.preprocessing.base import ImageReadError

    for path in images[:32]:
        r, c = reference.run_many([path])[0], candidate.run_many([path])[0]
        if isinstance(r, ImageReadError) or isinstance(c, ImageReadError):
            continue
        check_model_input(runner, r, c)
        out = np.asarray(runner.run([squeeze_batch(r)[None]])[0][0])
        if labels and is_classification(out[None]):
            check_label_range(np.array([labels[p.name] for p in images if p.name in labels]), int(out.size), "labels.csv")
        return


def preprocess_parity_on_ray(
    reference_text: str, candidate_text: str, images: Sequence[Path], *, python_path: Sequence[Path] = (),
    model_path: Optional[Path] = None, runner=None, thresholds: Thresholds = Thresholds(),
    labels: Optional[Dict[str, int]] = None, diagnose: bool = True, settings, chunk: int = DEFAULT_CHUNK, progress=None,
) -> Tuple[PreprocessParityReport, List, List, List[Path]]:
    """The report plus, for the bounded list of images it names, both pipelines' tensors and the paths."""
    from edgekit.preprocessing.sources import open_pipeline, spec_of

    images = [Path(p) for p in images]
    quant = input_quantization(runner) if runner is not None else None
    reference = open_pipeline(reference_text, python_path=python_path, input_quantization=quant)  # bad input: fails here
    candidate = open_pipeline(candidate_text, python_path=python_path, input_quantization=quant)
    units = Units.for_spec(spec_of(reference) or spec_of(candidate))
    if runner is not None:
        _validate_model(reference, candidate, runner, images, labels)
    chunks = [(tuple(str(p) for p in images[i:i + chunk]), tuple((labels or {}).get(p.name) for p in images[i:i + chunk]))
              for i in range(0, len(images), chunk)]
    pixels = PixelSums()
    model = ParitySums.empty(len(runner.output_names()), TOP_K) if runner is not None else None

    def merge(part) -> None:
        pixels.merge(part[0])
        if model is not None and part[1] is not None:
            model.merge(part[1])
        if progress:
            progress(part[0].images)

    args = (reference_text, candidate_text, tuple(str(p) for p in python_path), quant,
            model_ref(model_path, runner) if runner is not None else None)
    with ray_session(settings):
        timing = map_chunks(PreprocessActor, args, chunks, settings, merge)
    agg = pixels.aggregate(units)
    effect = model_result(runner, model) if model is not None and model.samples else None
    kept = pixels.kept_images()
    failures = check(agg, effect, thresholds, kept)
    report = PreprocessParityReport(reference.describe(), candidate.describe(), kept, agg, thresholds, units.source,
                                    failures, effect)
    report.execution = execution(settings, pixels.images, timing.wall_time_s, timing.cluster_cpus)
    report.execution["images_listed"] = f"{len(kept)} of {pixels.images} images listed (every problem up to 100, the {TOP_K} worst)"
    by_name = {p.name: p for p in images}
    kept_paths = [by_name[d.name] for d in kept]
    ref_results, cand_results = reference.run_many(kept_paths), candidate.run_many(kept_paths)  # bounded: plot, diagnosis
    if failures and diagnose:
        from edgekit.preprocessing.diagnose import diagnose as run_diagnosis

        report.diagnosis = run_diagnosis(reference, candidate, kept_paths, ref_results, cand_results, kept)
        if isinstance(report.diagnosis, dict):
            report.diagnosis["on_images"] = f"the {len(kept)} listed images (problems and the worst), not all {pixels.images}"
    return report, ref_results, cand_results, kept_paths
