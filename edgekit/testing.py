"""Checks for your own test suite (pytest or any other runner).

    from edgekit.testing import assert_preprocessing_parity

    def test_app_preprocessing_matches_training():
        assert_preprocessing_parity("training/preprocess.json", my_app.preprocess, "tests/images",
                                    model="model.tflite", max_flip_rate=0.0)

A reference or candidate can be: a PreprocessSpec or a spec dict (the Pillow reference runs it), a
path to a spec file, ``"IMPL:spec.json"`` (pillow, opencv, torchvision, tf, c), a callable
``f(image_path: str) -> array``, a ``"package.module:function"`` string, a folder of
``<image stem>.npy`` tensors, or an edgekit Preprocessor. On failure an AssertionError says what
differs, by how much, and which known mismatch explains it: when one side is a spec by perturbing it,
when both are black boxes (callables, tensor folders) by describing each side from its tensors and the
decoded images (edgekit.preprocessing.blackbox), with PSNR before/after each cause.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.preprocessing.base import Preprocessor, implementation
from edgekit.preprocessing.parity import PreprocessParityReport, Thresholds, input_quantization, open_model, read_labels, run_parity
from edgekit.preprocessing.sources import PythonCallablePreprocessor, list_images, open_pipeline, resolve_spec

# a spec may be given as the user's dict (validated by PreprocessSpec.from_dict), a path, or a pipeline
PipelineLike = Union[str, Path, PreprocessSpec, Mapping[str, Any], Callable[[str], Any], Preprocessor]


def as_pipeline(obj: PipelineLike, *, python_path: Sequence[Path] = (), input_quantization_=None) -> Preprocessor:
    """Any accepted reference/candidate form -> a Preprocessor."""
    if isinstance(obj, Preprocessor):
        return obj
    if isinstance(obj, PreprocessSpec):
        return implementation("pillow", resolve_spec(obj, input_quantization_))
    if isinstance(obj, Mapping):
        return implementation("pillow", resolve_spec(PreprocessSpec.from_dict(obj), input_quantization_))
    if isinstance(obj, (str, Path)):
        return open_pipeline(str(obj), python_path=python_path, input_quantization=input_quantization_)
    if callable(obj):
        name = f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', repr(obj))}"
        return PythonCallablePreprocessor(name, obj)
    raise TypeError(f"cannot use {type(obj).__name__} as a preprocessing pipeline")


def check_preprocessing_parity(
    reference: PipelineLike, candidate: PipelineLike, images: Union[str, Path, Sequence[Union[str, Path]]], *,
    model: Union[str, Path, Any, None] = None, max_mean_abs_lsb: Optional[float] = 0.5, max_abs_lsb: Optional[float] = None,
    min_psnr_db: Optional[float] = 40.0, max_flip_rate: Optional[float] = 0.01, max_mean_abs: Optional[float] = None,
    diagnose: bool = True, python_path: Sequence[Path] = (),
) -> PreprocessParityReport:
    """Run both pipelines and return the report (truthy when every threshold holds)."""
    runner = open_model(Path(model)) if isinstance(model, (str, Path)) else model
    quant = input_quantization(runner) if runner is not None else None
    ref = as_pipeline(reference, python_path=python_path, input_quantization_=quant)
    cand = as_pipeline(candidate, python_path=python_path, input_quantization_=quant)
    if isinstance(images, (str, Path)):
        files, labels = list_images(Path(images)), read_labels(Path(images))
    else:
        files, labels = [Path(p) for p in images], None
    thresholds = Thresholds(max_mean_abs_lsb=max_mean_abs_lsb, max_abs_lsb=max_abs_lsb, min_psnr_db=min_psnr_db,
                            max_flip_rate=max_flip_rate, max_mean_abs=max_mean_abs)
    report, _, _ = run_parity(ref, cand, files, thresholds=thresholds, model=runner, diagnose=diagnose, labels=labels)
    return report


def failure_message(report: PreprocessParityReport) -> str:
    a = report.aggregate
    lines = [f"preprocessing parity failed: candidate {report.candidate.get('label')} vs reference "
             f"{report.reference.get('label')} on {a.get('compared', 0)} of {a.get('images', 0)} images"]
    lines += [f"  - {f}" for f in report.failures]
    d = report.diagnosis
    if d:
        lines.append("cause: " + (d["summary"] if d.get("available") else f"not diagnosed ({d.get('reason')})"))
    worst = report.worst(1)
    if worst:
        m = worst[0].metrics
        key = "mean_abs_lsb" if "mean_abs_lsb" in m else "mean_abs"
        lines.append(f"worst image: {worst[0].name} ({key} {m[key]:.4g})")
    errors = [x for x in report.images if x.errors]
    for x in errors[:5]:
        lines.append(f"{x.name}: " + "; ".join(f"{who}: {why}" for who, why in x.errors.items()))
    return "\n".join(lines)


def assert_preprocessing_parity(reference: PipelineLike, candidate: PipelineLike,
                                images: Union[str, Path, Sequence[Union[str, Path]]], **options) -> PreprocessParityReport:
    """Assert that ``candidate`` preprocesses ``images`` like ``reference`` (see check_preprocessing_parity
    for the options and their defaults); the AssertionError names the cause."""
    report = check_preprocessing_parity(reference, candidate, images, **options)
    if not report.passed:
        raise AssertionError(failure_message(report))
    return report


def assert_matches_reference(implementation_name: str, spec: Union[PreprocessSpec, Mapping[str, Any], str, Path],
                             images, **options) -> PreprocessParityReport:
    """Shorthand: implementation ``implementation_name`` of ``spec`` against the Pillow reference."""
    if isinstance(spec, (str, Path)):
        spec = PreprocessSpec.load(Path(spec))
    elif isinstance(spec, Mapping):
        spec = PreprocessSpec.from_dict(spec)
    return assert_preprocessing_parity(spec, implementation(implementation_name, spec), images, **options)
