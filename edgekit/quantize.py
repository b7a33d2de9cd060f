"""Quantize stage: model + calibration data -> full-int8 artifact, parity report, manifest."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

from edgekit.artifact import Artifact, Manifest
from edgekit.atomic import atomic_output_dir
from edgekit.calibration import dataset as data
from edgekit.calibration.ranges import RANGE_METHODS, RangeOptions, choose_ranges
from edgekit.calibration.statistics import cache_key, collect_statistics
from edgekit.converters import load_backends
from edgekit.errors import UnknownNameError, UnsupportedOpError
from edgekit.export import to_float_tflite
from edgekit.parity.compare import ParityReport, compare
from edgekit.parity.runners import TFLiteRunner
from edgekit.parity.tolerance import QUANTIZE_DEFAULT, Tolerance
from edgekit.preprocess import PreprocessSpec
from edgekit.provenance import sha256_bytes
from edgekit.report import json_safe, write_quantize_report
from edgekit.tflite_model import TFLiteModel

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

    def params(self) -> dict:
        return {
            "method": self.method,
            "percentile": self.range_options.percentile if self.method == "percentile" else None,
            "format": self.format,
            "calib_size": self.calib_size,
            "seed": self.seed,
            "input_shape": list(self.input_shape) if self.input_shape else None,
        }


@dataclass
class QuantizeResult:
    outdir: Path
    artifacts: Dict[str, Artifact]
    parity: ParityReport


def _no_progress(label: str, total: int) -> Callable[[int], None]:
    return lambda n: None


def quantize(
    model: str,
    calib: Path,
    outdir: Path,
    options: QuantizeOptions = QuantizeOptions(),
    *,
    progress: ProgressFactory = _no_progress,
) -> QuantizeResult:
    """Run export -> calibrate -> quantize -> parity and write OUTDIR atomically."""
    converters = load_backends()
    quantizers = [n for n in converters.names() if getattr(converters.get(n), "stage", "quantize") == "quantize"]
    if options.format not in quantizers:
        raise UnknownNameError("quantize --format", options.format, quantizers)
    converter = converters.get(options.format)()
    RANGE_METHODS.get(options.method)  # unknown method: fail before any work
    spec = PreprocessSpec.load(options.preprocess) if options.preprocess else None

    exported = to_float_tflite(model, input_shape=options.input_shape)
    float_model = TFLiteModel(exported.tflite, source=f"{model} (float reference)")
    inputs = float_model.input_specs()
    names = [i.name for i in inputs]

    source = data.open_source(Path(calib), names, spec)
    if options.eval_data is not None:
        calib_set = data.whole(source, limit=options.calib_size, seed=options.seed)
        eval_source = data.open_source(Path(options.eval_data), names, spec)
        eval_set = data.whole(eval_source, seed=options.seed)
    else:
        calib_set, eval_set = data.split(source, calib_size=options.calib_size, seed=options.seed, holdout_fraction=HOLDOUT_FRACTION)
    calib_samples = calib_set.samples(inputs)
    eval_samples = eval_set.samples(inputs)  # validate both before the long work

    support = converter.check_support(float_model)
    if not support.ok:
        raise UnsupportedOpError(support, target="int8 TFLite")

    float_sha = sha256_bytes(float_model.data)
    stats = collect_statistics(
        float_model, calib_samples, key=cache_key(float_sha, calib_set.fingerprint),
        progress=progress("calibrating", 2 * len(calib_samples)),
    )
    ranges = choose_ranges(stats, options.method, options.range_options)
    result = converter.convert(float_model, ranges)
    int8_model = TFLiteModel(result.tflite, source="model_int8.tflite")

    report = compare(
        TFLiteRunner(float_model, kernels="reference", sha256=float_sha),
        TFLiteRunner(int8_model, kernels="reference", sha256=sha256_bytes(result.tflite)),
        eval_samples,
        tolerance=options.tolerance,
        labels=eval_set.labels,
        progress=progress("parity", len(eval_samples)),
    )
    report.data = {"calibration": calib_set.describe(), "evaluation": eval_set.describe()}

    with atomic_output_dir(Path(outdir)) as stage:
        manifest = Manifest(command="quantize")
        source_path = Path(model)
        source_art = None
        if source_path.exists():
            source_art = manifest.add(Artifact.from_file(source_path, format=exported.kind.value, stage="source"))
        (stage / "model_float.tflite").write_bytes(float_model.data)
        float_art = manifest.add(Artifact.from_file(
            stage / "model_float.tflite", format="tflite-float32", stage="export", parent=source_art,
            params={"route": exported.route, "source": model},
        ))
        (stage / converter.filename).write_bytes(result.tflite)
        int8_art = manifest.add(Artifact.from_file(
            stage / converter.filename, format="tflite-int8", stage="quantize", parent=float_art,
            params={**options.params(), "calibration_fingerprint": calib_set.fingerprint, "calibration_samples": len(calib_set)},
        ))
        (stage / "parity.json").write_text(json.dumps(json_safe(report.to_json()), indent=2) + "\n")
        manifest.add(Artifact.from_file(stage / "parity.json", format="parity-report", stage="parity", parent=int8_art,
                                                     params={"thresholds": options.tolerance.to_json()}))
        write_quantize_report(
            stage / "report.md", model=model, exported=exported, options=options, calib=calib_set,
            stats=stats, ranges=ranges, result=result, parity=report, int8_sha=int8_art.sha256, float_sha=float_sha,
        )
        manifest.add(Artifact.from_file(stage / "report.md", format="markdown", stage="report", parent=int8_art))
        manifest.extra["calibration"] = calib_set.describe()
        manifest.write(stage / "manifest.json")
        artifacts = {a.stage: a.relocated(Path(outdir) / a.path.name) for a in manifest.artifacts if a.stage != "source"}
    return QuantizeResult(Path(outdir), artifacts, report)
