"""The contract of an `edgekit quantize --format NAME` backend (converters/<name>/).

quantize() (edgekit/quantize.py) owns what every format shares: reading and splitting the calibration
data, the parity comparison FP32 vs quantized, the atomic output folder, manifest and report. A
backend owns what differs: how the float reference is made and run, how it is quantized, which
options it accepts, and its own Markdown section. Core code never branches on backend names.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple, Type, Union

from edgekit.calibration.dataset import Sample
from edgekit.parity.runners import ModelRunner

FileContent = Union[bytes, Path]  # bytes to write, or a file / folder (.mlpackage) to copy


@dataclass
class FloatReference:
    """The float model the quantized one is compared with."""

    runner: ModelRunner
    kind: str                       # detected source kind (ModelKind.value)
    route: str                      # how it was exported ("as given" when used unchanged)
    main_file: str                  # e.g. "model_float.tflite"; must be a key of ``files``
    format: str                     # manifest format, e.g. "tflite-float32"
    files: Dict[str, FileContent]
    sha256: str
    handle: Any = None              # backend-private (TFLiteModel, torch module, onnx path, ...)
    notes: Sequence[str] = ()


@dataclass
class QuantizeInputs:
    """Everything a backend may need besides the model: data, a scratch folder, progress."""

    calib_samples: List[Sample]
    eval_samples: List[Sample]
    calib_set: Any                  # calibration.dataset subset (describe(), fingerprint, labels)
    eval_set: Any
    workdir: Path                   # scratch folder, removed after the run
    progress: Callable[[str, int], Callable[[int], None]]
    preprocess: Any = None          # PreprocessSpec or None
    eval_labels: Optional[Sequence[int]] = None


@dataclass
class QuantizedModel:
    """What a backend produced."""

    runner: ModelRunner             # runs the quantized model for parity
    main_file: str                  # e.g. "model_int8.tflite"; must be a key of ``files``
    format: str                     # manifest format, e.g. "tflite-int8", "mlpackage-w8a8", "onnx-qdq-int8"
    files: Dict[str, FileContent]
    # backend settings for the manifest (``Artifact.params``: each backend records its own)
    params: Dict[str, Any] = field(default_factory=dict)
    report_lines: List[str] = field(default_factory=list)      # backend Markdown sections (## headings)
    # JSON extras -> parity.json["quantization"] (``ParityReport.data``: the backend's own facts, its own shape)
    summary: Dict[str, Any] = field(default_factory=dict)
    per_layer: Any = None           # an object with write(folder) -> [file names] (--debug), or None
    handle: Any = None


# The QuantizeOptions fields only some formats take: field -> (the CLI flag(s) that set it, its default).
# A backend names the ones it takes in ``options``; quantize() refuses the others (``foreign_option_problems``),
# so no backend lists another backend's flags.
FORMAT_OPTIONS: Dict[str, Tuple[str, Any]] = {
    "engine": ("--engine", None),
    "deployment_target": ("--deployment-target", None),
    "compute_units": ("--compute-units", "all"),
    "io": ("--io", "int8"),
    "labels": ("--labels", None),
    "model_info": ("--model-name / --description / --version / --author / --license", None),
    "fallback": ("--fallback", "none"),
    "fallback_to": ("--fallback-to", "float"),
    "keep_float": ("--keep-float", ()),
}


def _shown(field: str, value: Any) -> str:
    if field == "model_info":
        return ""
    if isinstance(value, (tuple, list)):
        return " " + " ".join(map(str, value))
    return f" {value}"


def foreign_option_problems(backend: "QuantizeBackend", options: Any,
                            backends: Mapping[str, Type["QuantizeBackend"]]) -> List[str]:
    """Each format-specific option set away from its default that ``backend`` does not take, naming the formats
    that do (asked from ``backends``, name -> backend class)."""
    takes = set(getattr(backend, "options", ()))
    problems = []
    for field, (flag, default) in FORMAT_OPTIONS.items():
        value = getattr(options, field)
        if field in takes or value == default or (field == "keep_float" and not value):
            continue
        others = [name for name, cls in backends.items() if field in getattr(cls, "options", ())]
        problems.append(f"{flag}{_shown(field, value)} (--format {backend.name} does not take it; "
                        f"{'it is for --format ' + ' / '.join(others) if others else 'no format takes it'})")
    return problems


class QuantizeBackend(Protocol):
    name: str
    stage: str  # "quantize"
    options: Tuple[str, ...]  # the FORMAT_OPTIONS fields it takes (the shared ones every backend takes)

    def option_problems(self, options) -> List[str]:
        """Every value of its own (and the shared) options this backend cannot honour, as user-facing sentences."""

    def export(self, model: str, options, workdir: Path) -> FloatReference:
        """Load ``model`` and return the float reference (raises UnsupportedOpError naming every op).

        ``workdir`` is the run's scratch folder (the same as QuantizeInputs.workdir), removed afterwards."""

    def quantize(self, reference: FloatReference, inputs: QuantizeInputs, options) -> QuantizedModel:
        """Quantize with the calibration samples."""
