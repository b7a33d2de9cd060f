"""The quantized .tflite as an app loads it: --io types, metadata (image properties, normalization, labels,
provenance). Called by the TFLite quantize backend after quantizing; the result replaces the model bytes."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from edgekit import __version__
from edgekit.errors import UserError
from edgekit.mobile.io_types import image_hw, image_spec_for_input, pixel_quantization, set_input_quantization
from edgekit.mobile.tflite_metadata import (ImageInputInfo, MetadataContent, ModelInfo, TensorInfoForMetadata,
                                            write_metadata)
from edgekit.provenance import tool_versions

log = logging.getLogger(__name__)


@dataclass
class Packaged:
    tflite: bytes
    summary: Dict[str, Any] = field(default_factory=dict)  # JSON extras -> parity.json["quantization"]["mobile"]
    report_lines: List[str] = field(default_factory=list)


def read_labels_file(path: Path) -> List[str]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--labels {path}: cannot read it ({exc})", fix="pass a UTF-8 text file with one class name per line") from exc
    labels = [line.strip() for line in text.splitlines() if line.strip()]
    if not labels:
        raise UserError(f"--labels {path} is empty", fix="write one class name per line, line i = output index i")
    return labels


def classification_output(shapes: Sequence[Sequence[int]]) -> Optional[int]:
    """Index of the only (1, N) output with N >= 2, else None."""
    found = [i for i, s in enumerate(shapes) if len([d for d in s if d != 1]) == 1 and max(s) >= 2]
    return found[0] if len(found) == 1 else None


def choose_labels(labels_file: Optional[Path], inputs, output_shapes: Sequence[Sequence[int]]) -> tuple:
    """(labels or None, output index or None, where they came from)."""
    index = classification_output(output_shapes)
    if labels_file is not None:
        labels = read_labels_file(labels_file)
        if index is None:
            raise UserError(f"--labels {labels_file}: the model has no single (1, N) classification output to label "
                            f"(outputs {[list(s) for s in output_shapes]})", fix="drop --labels")
        classes = max(output_shapes[index])
        if len(labels) != classes:
            raise UserError(f"--labels {labels_file} has {len(labels)} names, the model's output has {classes} classes",
                            fix="write exactly one name per class, line i = output index i")
        return labels, index, str(labels_file)
    if index is None:
        return None, None, None
    from edgekit.converters.coreml.image import class_labels

    names = class_labels(inputs, output_shapes[index])
    if names is None:
        return None, None, None
    source = "labels.txt beside the data" if any(isinstance(n, str) for n in names) else "the data's integer labels (class ids)"
    return [str(n) for n in names], index, source


def package_tflite(tflite: bytes, *, inputs, io: str, info: ModelInfo, labels_file: Optional[Path],
                   provenance: Dict[str, Any]) -> Packaged:  # the backend's provenance facts, packed as JSON
    """Apply --io pixel quantization (uint8 image input) and write the metadata."""
    from edgekit.tflite_model import TFLiteModel

    model = TFLiteModel(tflite, source="quantized model")
    model_in, model_out = model.inputs, model.outputs
    source_kind = getattr(getattr(inputs.calib_set, "source", None), "kind", None)
    spec = image_spec_for_input(inputs.preprocess, source_kind, model_in[0].shape) if len(model_in) == 1 else None
    notes = []
    if io == "uint8" and spec is not None:
        scale, zp = pixel_quantization(spec)
        tflite = set_input_quantization(tflite, scale, zp)
        model = TFLiteModel(tflite, source="quantized model")
        model_in = model.inputs
        notes.append(f"uint8 input holds raw 0..255 pixels (scale {scale:.9g}, zero point {zp}); QUANTIZE requantizes to int8")
    image = None
    if spec is not None:
        from edgekit.preprocessing.export_params import tflite_normalization

        norm = tflite_normalization(spec)
        h, w = image_hw(spec, model_in[0].shape)
        image = ImageInputInfo(spec.color, h, w, norm["mean"], norm["std"], spec.name)
        if spec.layout != "NHWC":
            notes.append("the input is NCHW: MediaPipe Tasks and the Android support library expect NHWC image inputs")
    labels, label_output, label_source = choose_labels(labels_file, inputs, [o.shape for o in model.outputs])

    def tensor(t) -> TensorInfoForMetadata:
        return TensorInfoForMetadata(t.name, np.dtype(t.dtype).name, t.scale, t.zero_point)

    content = MetadataContent(info=info, inputs=[tensor(t) for t in model_in], outputs=[tensor(t) for t in model_out],
                              image=image, labels=labels, label_output=label_output,
                              provenance={**provenance, "edgekit_version": __version__, "io": io, "tools": tool_versions()})
    packed = write_metadata(tflite, content)
    summary = {
        "io": io, "metadata": {**{"name": "edgekit model", "version": "1"}, **info.given()},
        "image_input": image.__dict__ if image else None, "labels": len(labels) if labels else None,
        "labels_source": label_source, "notes": notes,
    }
    lines = ["## Mobile packaging (TFLite metadata)", "",
             f"- input/output type: **{io}** (inside int8)" + ("; " + "; ".join(notes) if notes else ""),
             f"- metadata: " + ", ".join(f"{k} {v!r}" for k, v in summary["metadata"].items())]
    if image:
        lines.append(f"- image input {image.height}x{image.width} {image.color}, normalization mean {image.mean} std {image.std} "
                     "on 0..255 pixels")
    lines.append(f"- class labels: {len(labels)} from {label_source} (labels.txt, TENSOR_AXIS_LABELS)" if labels
                 else "- class labels: none (no single (1, N) output, or no names: pass --labels labels.txt)")
    lines += ["- provenance: edgekit_provenance.json packed in the model (source and float sha256, calibration fingerprint)",
              "- read it back: `edgekit inspect model_int8.tflite`", ""]
    return Packaged(packed, summary, lines)
