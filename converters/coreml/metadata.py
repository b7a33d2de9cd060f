"""Model metadata: author, license, version, description, and edgekit provenance in user_defined_metadata."""
from __future__ import annotations

import json
from typing import Any, Dict, Optional

from edgekit import __version__
from edgekit.provenance import tool_versions

PREFIX = "com.edgekit."


def provenance(*, source: str, source_sha256: Optional[str], precision: str, params: Dict[str, Any],
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
    return {PREFIX + k: str(v) for k, v in data.items()}


def apply_metadata(mlmodel, *, source: str, precision: str, entries: Dict[str, str]) -> None:
    """Set the standard fields and the edgekit entries on ``mlmodel`` (before saving)."""
    mlmodel.author = f"edgekit {__version__} (converted from {source})"
    mlmodel.license = "the license of the source model applies (edgekit does not change it)"
    mlmodel.version = __version__
    mlmodel.short_description = (
        f"{precision} Core ML program made by `edgekit quantize --format coreml` from {source}; "
        "parity against the float PyTorch model is in parity.json beside it"
    )
    for key, value in entries.items():
        mlmodel.user_defined_metadata[key] = value
