"""Saving .mlpackage folders reproducibly: coremltools names package items with random UUIDs and serializes the
spec's metadata map in hash order; both are made deterministic here (same inputs -> same bytes)."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

# coremltools' torch.export frontend leaves a debug-handle map beside the model; it is not a package item (Core ML
# never reads it), is larger than the weights of small models, and would ship inside the app: dropped.
NOT_PACKAGE_ITEMS = ("executorch_debug_handle_mapping.json",)
# Any fixed namespace works; item identifiers become uuid5(namespace, item path), so equal content gives equal bytes.
ITEM_NAMESPACE = uuid.UUID("6f2b8a36-1d8e-4a55-9a5e-6b0f1e3c2d71")


def save_package(mlmodel, path: Path) -> Path:
    """mlmodel.save(path), then the spec re-serialized deterministically, the item identifiers fixed and files that
    are not package items removed."""
    from coremltools.proto import Model_pb2

    path = Path(path)
    mlmodel.save(str(path))
    for spec_path in path.glob("Data/com.apple.CoreML/*.mlmodel"):
        spec = Model_pb2.Model()
        spec.ParseFromString(spec_path.read_bytes())
        spec_path.write_bytes(spec.SerializeToString(deterministic=True))
    for name in NOT_PACKAGE_ITEMS:
        (path / name).unlink(missing_ok=True)
    manifest_path = path / "Manifest.json"
    manifest = json.loads(manifest_path.read_text())
    renamed = {old: str(uuid.uuid5(ITEM_NAMESPACE, item["path"])) for old, item in manifest["itemInfoEntries"].items()}
    manifest["itemInfoEntries"] = {renamed[old]: item for old, item in sorted(manifest["itemInfoEntries"].items(),
                                                                          key=lambda kv: kv[1]["path"])}
    manifest["rootModelIdentifier"] = renamed[manifest["rootModelIdentifier"]]
    manifest_path.write_text(json.dumps(manifest, indent=4) + "\n")
    return path
