"""Quantize stage: model + calibration data -> quantized artifact (backend of --format), parity report, manifest."""
from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple

import numpy as np

from edgekit.artifact import Artifact, Manifest
from edgekit.atomic import atomic_output_dir, check_output_dir
from edgekit.calibration import dataset as data
from edgekit.parity.output_kind import overrides_for
from edgekit.calibration.ranges import RANGE_METHODS, RangeOptions
from edgekit.converters import load_backends
from edgekit.errors import UnknownNameError, UserError
from edgekit.parity.compare import ParityReport, compare
from edgekit.parity.tolerance import QUANTIZE_DEFAULT, Tolerance
from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.quantize_backend import FileContent, QuantizeInputs, foreign_option_problems
from edgekit.report import write_quantize_report
from edgekit.results import Section

if TYPE_CHECKING:
    from edgekit.scale.ray_parity import RaySettings

log = logging.getLogger(__name__)

ProgressFactory = Callable[[str, int], Callable[[int], None]]
HOLDOUT_FRACTION = 0.2


@dataclass(frozen=True)
class QuantizeOptions:
    method: str = "minmax"
    range_options: RangeOptions = field(default_factory=RangeOptions)
    format: str = "tflite"
    calib_size: Optional[int] = None
    seed: int = 0
    input_shape: Optional[Tuple[int, ...]] = None
    preprocess: Optional[Path] = None
    eval_data: Optional[Path] = None
    tolerance: Tolerance = QUANTIZE_DEFAULT
    # precision (each backend says which values it accepts)
    weights: str = "int8"
    activations: str = "int8"                 # tflite: int8 | int16 (16x8); coreml: int8 | float16; onnx: int8
    engine: Optional[str] = None              # onnx: ort (default) | nncf
    deployment_target: Optional[str] = None   # coreml: iOS16 | iOS17 | iOS18
    compute_units: str = "all"                # coreml: all | cpu_and_ne | cpu_only
    # per-layer analysis and mixed precision
    debug: bool = False                       # per-layer float-vs-quantized comparison (layers.json/md/png)
    fallback: str = "none"                    # none | auto: keep sensitive layers out of int8 until tolerance is met
    fallback_to: str = "float"                # float | int16 (16x8) for the layers --fallback picks
    keep_float: Tuple[str, ...] = ()          # op names or op types kept in float
    batch_axes: Tuple[Tuple[str, str], ...] = ()  # --batch-axis INPUT=AXIS|none (default: detected per input)
    # dataset scale: parity on --eval-data runs on Ray Data (edgekit.scale); None = in this process
    scale: Optional["RaySettings"] = None
    scale_chunk: int = 256
    scale_column: Optional[str] = None        # Parquet column holding the input
    # mobile packaging (TFLite metadata; see edgekit/mobile)
    io: str = "int8"                          # tflite: input/output type int8 | uint8 | float32 (inside int8)
    labels: Optional[Path] = None             # class names, one per line (default: names/ids from the data)
    model_info: Any = None                    # edgekit.mobile.tflite_metadata.ModelInfo (name, version, author, ...)

    def params(self) -> dict:
        return {
            "method": self.method,
            "percentile": self.range_options.percentile if self.method == "percentile" else None,
            "format": self.format,
            "calib_size": self.calib_size,
            "seed": self.seed,
            "input_shape": list(self.input_shape) if self.input_shape else None,
            "weights": self.weights,
            "activations": self.activations,
            "engine": self.engine,
            "deployment_target": self.deployment_target,
            "compute_units": self.compute_units,
            "fallback": self.fallback,
            "fallback_to": self.fallback_to if self.fallback != "none" else None,
            "keep_float": list(self.keep_float),
            "io": self.io,
            "labels": str(self.labels) if self.labels else None,
            "model_info": self.model_info.given() if self.model_info is not None else None,
        }


class QuantizeReport(Section):
    """What `edgekit quantize` produced: the artifacts in OUTDIR by stage (export, quantize, parity, report), the
    parity of the quantized model against its float reference, and the quantized model's file name."""

    outdir: Path
    artifacts: Dict[str, Artifact]
    parity: ParityReport
    main_file: str = "model_int8.tflite"


QuantizeResult = QuantizeReport  # the earlier name


def _no_progress(label: str, total: int) -> Callable[[int], None]:
    return lambda n: None


def quantizer_names() -> list:
    converters = load_backends()
    return [n for n in converters.names() if getattr(converters.get(n), "stage", "quantize") == "quantize"]


def option_problems(backend, options: QuantizeOptions) -> list:
    """Every option the chosen backend cannot honour: format-specific flags it does not take (the formats that do
    are named), then the values of its own and the shared options it refuses."""
    converters = load_backends()
    formats = {n: converters.get(n) for n in quantizer_names()}
    return foreign_option_problems(backend, options, formats) + backend.option_problems(options)


def quantize(
    model: str,
    calib: Path,
    outdir: Path,
    options: QuantizeOptions = QuantizeOptions(),
    *,
    progress: ProgressFactory = _no_progress,
) -> QuantizeReport:
    """Run export -> calibrate -> quantize -> parity with the --format backend and write OUTDIR atomically."""
    check_output_dir(Path(outdir), inputs=[p for p in (Path(model), Path(calib), options.eval_data) if p and Path(p).exists()])
    converters = load_backends()
    quantizers = quantizer_names()
    if options.format not in quantizers:
        raise UnknownNameError("quantize --format", options.format, quantizers)
    backend = converters.get(options.format)()
    RANGE_METHODS.get(options.method)  # unknown method: fail before any work
    problems = option_problems(backend, options)
    if problems:
        raise UserError(f"--format {options.format} cannot honour: " + "; ".join(problems),
                        fix="drop or change those options (edgekit quantize --help lists them per format)")
    spec = PreprocessSpec.load(options.preprocess) if options.preprocess else None

    with tempfile.TemporaryDirectory(prefix="edgekit-quantize-") as work:
        return _export_quantize_compare_write(backend, model, Path(calib), Path(outdir), options, spec, Path(work), progress)


def _export_quantize_compare_write(backend, model: str, calib: Path, outdir: Path, options: QuantizeOptions, spec,
                                   workdir: Path, progress: ProgressFactory) -> QuantizeReport:
    """The run itself; ``workdir`` is a scratch folder removed afterwards (the backend may keep files there)."""
    exported = progress("exporting", 1)  # the export (a Keras/PyTorch conversion) can take tens of seconds
    reference = backend.export(model, options, workdir)
    exported(1)
    inputs = data.with_batch_axes(reference.runner.input_specs(), options.batch_axes)
    overrides_for(reference.runner.output_names(), options.tolerance.output_kinds)  # before the long work
    names = [i.name for i in inputs]

    source = data.open_source(Path(calib), names, spec)
    if options.scale is not None:
        return _quantize_with_ray_parity(backend, reference, model, source, outdir, options, spec, workdir, progress)
    if options.eval_data is not None:
        calib_set = data.whole(source, limit=options.calib_size, seed=options.seed)
        eval_source = data.open_source(Path(options.eval_data), names, spec)
        eval_set = data.whole(eval_source, seed=options.seed)
    else:
        calib_set, eval_set = data.split(source, calib_size=options.calib_size, seed=options.seed, holdout_fraction=HOLDOUT_FRACTION)
    calib_samples = calib_set.samples(inputs)
    eval_samples = eval_set.samples(inputs)  # validate both before the long work
    _check_every_label(reference.runner, calib_samples, source)

    converted = progress("quantizing", 1)
    quantized = backend.quantize(reference, QuantizeInputs(
        calib_samples=calib_samples, eval_samples=eval_samples, calib_set=calib_set, eval_set=eval_set,
        workdir=workdir, progress=progress, preprocess=spec or getattr(source, "spec", None),
        eval_labels=eval_set.labels,
    ), options)
    converted(1)

    report = compare(
        reference.runner, quantized.runner, eval_samples,
        tolerance=options.tolerance, labels=eval_set.labels, progress=progress("parity", len(eval_samples)),
    )
    report = report.with_data({"calibration": calib_set.describe(), "evaluation": eval_set.describe()})
    return _write_outputs(model, outdir, options, reference, quantized, calib_set, report)


def _check_every_label(runner, samples, source) -> None:
    """Every label of the data (not only the held-out rows parity scores) must be a class of the model: a label 42
    in the calibration rows of a 10-class model is a labelling mistake that would otherwise pass unseen."""
    labels = getattr(source, "labels", None)
    if not labels or not samples:
        return
    from edgekit.calibration.labels import check_label_range
    from edgekit.parity.compare import is_classification

    first = np.asarray(runner.run(samples[0])[0][0])[None]
    input_sizes = [int(np.prod(spec.shape[1:])) for spec in runner.input_specs()]
    if is_classification(first, input_sizes):
        check_label_range(labels, int(first.reshape(1, -1).shape[1]), f"{source.path} (all {len(labels)} rows)")


def _quantize_with_ray_parity(backend, reference, model: str, source, outdir: Path, options: QuantizeOptions, spec,
                              workdir: Path, progress: ProgressFactory) -> QuantizeReport:
    """Quantize with the whole calibration source; parity on --eval-data runs on Ray from the written files."""
    from edgekit.parity.runners import RUNNERS
    from edgekit.export.detect import detect_kind
    from edgekit.scale.ray_parity import check_reachable, ray_parity
    from edgekit.scale.sources import list_source

    problems = []
    if options.eval_data is None:
        problems.append("--ray needs --eval-data (the held-out data at scale)")
    if options.fallback != "none" or options.debug:
        problems.append("--fallback auto and --debug evaluate candidates in this process; they do not run on Ray")
    if options.batch_axes:
        problems.append("--batch-axis applies to in-process data only: Ray shards are read batch-first")
    if problems:
        raise UserError("; ".join(problems), fix="pass --eval-data DATA and drop --fallback/--debug, or drop --ray")
    if options.scale.address is not None:
        check_reachable(options.scale.address)
    inputs = data.with_batch_axes(reference.runner.input_specs(), options.batch_axes)
    overrides_for(reference.runner.output_names(), options.tolerance.output_kinds)  # before the long work
    eval_source = list_source(Path(options.eval_data), inputs, spec, chunk=options.scale_chunk,
                              column=options.scale_column)  # listed, not loaded
    calib_set = data.whole(source, limit=options.calib_size, seed=options.seed)
    calib_samples = calib_set.samples(inputs)
    quantized = backend.quantize(reference, QuantizeInputs(
        calib_samples=calib_samples, eval_samples=[], calib_set=calib_set, eval_set=None,
        workdir=workdir, progress=progress, preprocess=spec or getattr(source, "spec", None), eval_labels=None,
    ), options)
    files = workdir / "ray-parity"
    files.mkdir()
    _write_files(files, reference.files)
    _write_files(files, quantized.files)
    for main in (reference.main_file, quantized.main_file):
        if detect_kind(str(files / main)).value not in RUNNERS:
            raise UserError(f"--format {options.format}: parity of {main} does not run on Ray (no runner opens it in a worker)",
                            fix="drop --ray, or use --format tflite / onnx")
    report = ray_parity(files / reference.main_file, files / quantized.main_file, eval_source, settings=options.scale,
                        tolerance=options.tolerance, progress=progress("parity", eval_source.samples))
    report = report.with_data({"calibration": calib_set.describe(), "evaluation": report.data["dataset"], **report.data})
    return _write_outputs(model, outdir, options, reference, quantized, calib_set, report)


def _write_outputs(model: str, outdir: Path, options: QuantizeOptions, reference, quantized, calib_set, report) -> QuantizeReport:
    """OUTDIR, atomically: the models, parity.json, per-layer files, report.md and manifest.json."""
    if quantized.summary:
        report = report.with_data({**report.data, "quantization": quantized.summary})

    with atomic_output_dir(Path(outdir)) as stage:
        manifest = Manifest(command="quantize")
        source_path = Path(model)
        source_art = None
        if source_path.exists():
            source_art = manifest.add(Artifact.from_file(source_path, format=reference.kind, stage="source"))
        _write_files(stage, reference.files)
        float_art = manifest.add(Artifact.from_file(
            stage / reference.main_file, format=reference.format, stage="export", parent=source_art,
            params={"route": reference.route, "source": model},
        ))
        _write_files(stage, quantized.files)
        int8_art = manifest.add(Artifact.from_file(
            stage / quantized.main_file, format=quantized.format, stage="quantize", parent=float_art,
            params={**options.params(), **quantized.params, "calibration_fingerprint": calib_set.fingerprint,
                    "calibration_samples": len(calib_set)},
        ))
        (stage / "parity.json").write_text(report.dumps())
        manifest.add(Artifact.from_file(stage / "parity.json", format="parity-report", stage="parity", parent=int8_art,
                                        params={"thresholds": options.tolerance.to_json()}))
        layer_files = quantized.per_layer.write(stage) if quantized.per_layer is not None else []
        for name in layer_files:
            manifest.add(Artifact.from_file(stage / name, format=Path(name).suffix.lstrip("."), stage="per-layer", parent=int8_art))
        write_quantize_report(
            stage / "report.md", model=model, reference=reference, quantized=quantized, options=options,
            calib=calib_set, parity=report, int8_sha=int8_art.sha256, layer_files=layer_files,
        )
        manifest.add(Artifact.from_file(stage / "report.md", format="markdown", stage="report", parent=int8_art))
        from edgekit.report_html.page import write_page
        from edgekit.report_html.parity import parity_page

        write_page(stage / "report.html", parity_page(report, f"edgekit quantize: parity of {Path(model).name}"))
        manifest.add(Artifact.from_file(stage / "report.html", format="html", stage="report", parent=int8_art))
        manifest.extra["calibration"] = calib_set.describe()
        manifest.write(stage / "manifest.json")
        artifacts = {a.stage: a.relocated(Path(outdir) / a.path.name) for a in manifest.artifacts
                     if a.stage not in ("source", "per-layer")}
    return QuantizeReport(outdir=Path(outdir), artifacts=artifacts, parity=report, main_file=quantized.main_file)


def _write_files(stage: Path, files: Dict[str, FileContent]) -> None:
    for name, content in files.items():
        target = stage / name
        if isinstance(content, (bytes, bytearray)):
            target.write_bytes(bytes(content))
        elif Path(content).is_dir():
            shutil.copytree(content, target)
        else:
            shutil.copyfile(content, target)
