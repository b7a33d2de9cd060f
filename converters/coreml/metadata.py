"""Model metadata: author, license, version, description, and edgekit provenance in user_defined_metadata."""
from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, Optional, Sequence

from edgekit import __version__
from edgekit.provenance import tool_versions

PREFIX = "com.edgekit."
PROVENANCE_VERSION = "1"
PREVIEW_TYPE_KEY = "com.apple.coreml.model.preview.type"  # Xcode's model preview (imageClassifier, ...)


def provenance(*, source: str, source_sha256: Optional[str], precision: str, params: Dict[str, Any],  # backend settings
               calibration_fingerprint: str, compute_units: str, pass_pipeline: str,
               preprocess: Optional[dict]) -> Dict[str, str]:
    """user_defined_metadata entries (strings only, as Core ML stores them)."""
    data = {
        "source": source,
        "source_sha256": source_sha256 or "n/a (package.module:factory is code, not a file)",
        "precision": precision,
        "quantization": json.dumps(params, sort_keys=True),
        "calibration_fingerprint": calibration_fingerprint,
        "compute_units": compute_units,
        "pass_pipeline": pass_pipeline,
        "tools": json.dumps(tool_versions(), sort_keys=True),
        "edgekit_version": __version__,
    }
    if preprocess is not None:
        data["preprocess"] = json.dumps(preprocess, sort_keys=True)
    data["provenance_version"] = PROVENANCE_VERSION
    return {PREFIX + k: str(v) for k, v in data.items()}


def provenance_digest(entries: Dict[str, str]) -> str:
    """SHA-256 over the sorted edgekit entries (without the digest itself): an integrity seal that shows whether the
    provenance was edited after edgekit wrote it. A checksum, not a signature with a key."""
    body = {k: v for k, v in entries.items() if k.startswith(PREFIX) and k != PREFIX + "provenance_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def apply_metadata(mlmodel, *, source: str, precision: str, entries: Dict[str, str], info=None, image=None,
                   labels: Optional[Sequence] = None) -> None:
    """Set the standard fields, the input/output descriptions Xcode shows, the preview type of image classifiers and
    the edgekit entries on ``mlmodel`` (before saving). ``info``: ModelInfo from --model-name/--author/... ."""
    given = info.given() if info is not None else {}
    mlmodel.author = given.get("author") or f"edgekit {__version__} (converted from {source})"
    mlmodel.license = given.get("license") or "the license of the source model applies (edgekit does not change it)"
    mlmodel.version = given.get("version") or __version__
    mlmodel.short_description = given.get("description") or (
        f"{given['name'] + ': ' if given.get('name') else ''}{precision} Core ML program made by `edgekit quantize "
        f"--format coreml` from {source}; parity against the float PyTorch model is in parity.json beside it"
    )
    for name, text in io_descriptions(mlmodel, image=image, labels=labels).items():
        if name in mlmodel.input_description:
            mlmodel.input_description[name] = text
        else:
            mlmodel.output_description[name] = text
    if image is not None and labels:
        mlmodel.user_defined_metadata[PREVIEW_TYPE_KEY] = "imageClassifier"
    entries = dict(entries)
    if given.get("name"):
        entries[PREFIX + "model_name"] = given["name"]
    entries[PREFIX + "provenance_sha256"] = provenance_digest(entries)  # last: it seals every entry above
    for key, value in entries.items():
        mlmodel.user_defined_metadata[key] = value


def io_descriptions(mlmodel, *, image=None, labels: Optional[Sequence] = None) -> Dict[str, str]:
    """{feature name: description} for every input and output of the model's spec."""
    spec = mlmodel.get_spec()
    out: Dict[str, str] = {}
    for feature in spec.description.input:
        if image is not None and feature.name == image.name:
            spec_ = image.spec
            out[feature.name] = (f"{spec_.color} image, resized/cropped as preprocessing spec {spec_.name!r} says; "
                                 f"the model normalizes it (scale {image.scale:.6g}, bias {image.bias})")
        else:
            out[feature.name] = "input tensor (float values as the model was trained with)"
    class_output = spec.description.predictedFeatureName
    prob_output = spec.description.predictedProbabilitiesName
    for feature in spec.description.output:
        if feature.name == class_output:
            out[feature.name] = f"most likely class label (one of {len(labels or [])})"
        elif feature.name == prob_output:
            out[feature.name] = "score per class label"
        else:
            out[feature.name] = "output tensor"
    return out
