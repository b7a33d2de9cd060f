"""The contract of an `edgekit quantize --format NAME` backend (converters/<name>/).

quantize() (edgekit/quantize.py) owns what every format shares: reading and splitting the calibration
data, the parity comparison FP32 vs quantized, the atomic output folder, manifest and report. A
backend owns what differs: how the float reference is made and run, how it is quantized, which
options it accepts, and its own Markdown section. Core code never branches on backend names.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Union

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
    params: Dict[str, Any] = field(default_factory=dict)       # backend settings for the manifest
    report_lines: List[str] = field(default_factory=list)      # backend Markdown sections (## headings)
    summary: Dict[str, Any] = field(default_factory=dict)      # JSON extras -> parity.json["quantization"]
    per_layer: Any = None           # an object with write(folder) -> [file names] (--debug), or None
    handle: Any = None


class QuantizeBackend(Protocol):
    name: str
    stage: str  # "quantize"

    def option_problems(self, options) -> List[str]:
        """Every QuantizeOptions setting this backend cannot honour, as user-facing sentences."""

    def export(self, model: str, options, workdir: Path) -> FloatReference:
        """Load ``model`` and return the float reference (raises UnsupportedOpError naming every op).

        ``workdir`` is the run's scratch folder (the same as QuantizeInputs.workdir), removed afterwards."""

    def quantize(self, reference: FloatReference, inputs: QuantizeInputs, options) -> QuantizedModel:
        """Quantize with the calibration samples."""
