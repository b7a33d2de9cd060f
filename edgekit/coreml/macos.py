"""Core ML on macOS through coremltools: load with timing, predict, and the per-op compute-unit placement.

Only macOS runs Core ML models (coremltools: "Model prediction is only supported on macOS"); elsewhere every
function that needs the runtime raises one clear UserError. Reading a model's inputs, choosing compute units
and summarising a placement are plain Python and work everywhere. The MLComputePlan walk itself lives in the
standalone runner script (edgekit/run/runners/remote_runner.py, copied as-is to devices) and is reused here.
"""
from __future__ import annotations

import logging
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np
from typing_extensions import TypedDict

from edgekit.errors import InvalidModelError, ToolMissingError, UserError, first_line
from edgekit.run.inputs import ModelInput
from edgekit.run.runners.remote_runner import COREML_COMPUTE_UNITS, coreml_compiled_path, coreml_output_array, coreml_placement

log = logging.getLogger(__name__)

COMPUTE_UNITS = COREML_COMPUTE_UNITS  # cpu_only, cpu_and_gpu, cpu_and_ne, all (coremltools.ComputeUnit, lower case)
EVERY_UNIT = "each"                    # --compute-units each: one run per compute unit setting
PLACEMENT_SOURCE = "estimated by Core ML (coremltools MLComputePlan: preferred device and estimated cost share per op)"
ARRAY_DTYPES = {"FLOAT32": np.float32, "FLOAT16": np.float16, "DOUBLE": np.float64, "INT32": np.int32, "INT8": np.int8}
GRAYSCALE, RGB, BGR, GRAYSCALE_FLOAT16 = 10, 20, 30, 40  # ImageFeatureType.ColorSpace values


def parse_compute_units(text: str) -> List[str]:
    """'cpu_only,all' -> ['cpu_only', 'all']; 'each' -> every setting. Unknown names: one error listing the valid ones."""
    names = [n.strip().lower().replace("-", "_") for n in str(text).split(",") if n.strip()]
    if names == [EVERY_UNIT]:
        return list(COMPUTE_UNITS)
    unknown = [n for n in names if n not in COMPUTE_UNITS]
    if unknown or not names:
        raise UserError(f"unknown Core ML compute units {', '.join(map(repr, unknown)) or repr(text)}; "
                        f"valid: {', '.join(COMPUTE_UNITS)} (comma-separated), or {EVERY_UNIT} for all four")
    return list(dict.fromkeys(names))  # each once, in the order given


def require_macos(what: str = "Core ML prediction") -> None:
    if sys.platform != "darwin":
        raise UserError(f"{what} runs only on macOS; this machine is {sys.platform} "
                        "(coremltools: Model prediction is only supported on macOS)",
                        fix="run on the Mac itself (--device macos), or reach it with --device ssh://USER@MAC --runtime coreml")


def _coremltools():
    try:
        import coremltools as ct
    except ImportError:
        raise ToolMissingError("coremltools", "pip install coremltools==9.0") from None
    return ct


def load_spec(path: Path):
    """The model's protobuf spec (works on every OS)."""
    ct = _coremltools()
    path = Path(path)
    if not path.exists():
        raise InvalidModelError(f"Core ML model {path} does not exist")
    try:
        return ct.utils.load_spec(str(path))
    except Exception as exc:  # coremltools raises several types for a damaged package
        raise InvalidModelError(f"{path} is not a readable Core ML model: {first_line(exc, None)}",
                                fix="pass a .mlpackage written by coremltools (MLModel.save)") from exc


def coreml_inputs(path: Path) -> List[ModelInput]:
    """The model's inputs as the run command feeds them: multi-arrays in their dtype and shape; images as uint8
    HxW (grayscale) or HxWx3 (RGB/BGR), float32 HxW for 16-bit float grayscale."""
    from coremltools.proto import FeatureTypes_pb2 as ft

    inputs = []
    for feature in load_spec(path).description.input:
        kind = feature.type.WhichOneof("Type")
        if kind == "multiArrayType":
            array = feature.type.multiArrayType
            dtype_name = ft.ArrayFeatureType.ArrayDataType.Name(array.dataType)
            if dtype_name not in ARRAY_DTYPES:
                raise InvalidModelError(f"input {feature.name!r} of {path} has data type {dtype_name}, which edgekit run cannot feed")
            shape = list(array.shape)
            if not shape and array.WhichOneof("ShapeFlexibility") == "enumeratedShapes":
                shape = list(array.enumeratedShapes.shapes[0].shape)
            elif not shape and array.WhichOneof("ShapeFlexibility") == "shapeRange":
                shape = [r.lowerBound for r in array.shapeRange.sizeRanges]
            inputs.append(ModelInput(feature.name, tuple(max(int(d), 1) for d in shape), np.dtype(ARRAY_DTYPES[dtype_name])))
        elif kind == "imageType":
            image = feature.type.imageType
            height, width = int(image.height), int(image.width)
            if image.colorSpace == GRAYSCALE_FLOAT16:
                inputs.append(ModelInput(feature.name, (height, width), np.dtype(np.float32)))
            elif image.colorSpace == GRAYSCALE:
                inputs.append(ModelInput(feature.name, (height, width), np.dtype(np.uint8)))
            else:
                inputs.append(ModelInput(feature.name, (height, width, 3), np.dtype(np.uint8)))
        else:
            raise InvalidModelError(f"input {feature.name!r} of {path} is a {kind}, which edgekit run cannot feed "
                                    "(multi-array and image inputs only)")
    return inputs


@dataclass
class LoadedModel:
    """An MLModel loaded on one compute unit setting; ``load_ms`` covers MLModel() (compile + load)."""

    path: Path
    compute_units: str
    load_ms: float
    model: Any

    def predict(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """One prediction; outputs as arrays (a classifier's probabilities dict in label order)."""
        return {name: coreml_output_array(value) for name, value in self.model.predict(dict(feeds)).items()}


def _unit(ct, compute_units: str):
    names = parse_compute_units(compute_units)
    if len(names) != 1:
        raise UserError(f"load one compute unit setting at a time, not {compute_units!r}")
    return names[0], ct.ComputeUnit[names[0].upper()]


def load(path: Path, compute_units: str = "all") -> LoadedModel:
    """Load a .mlpackage with coremltools on this Mac, timed."""
    require_macos()
    ct = _coremltools()
    name, unit = _unit(ct, compute_units)
    load_spec(path)  # a clear error for a missing or damaged package before Core ML's own message
    start = time.perf_counter()
    model = ct.models.MLModel(str(path), compute_units=unit)
    load_ms = (time.perf_counter() - start) * 1e3
    log.info("loaded %s on %s in %.1f ms", path, name, load_ms)
    return LoadedModel(Path(path), name, load_ms, model)


def compute_plan(path: Path, compute_units: str = "all") -> Dict[str, Any]:  # edgekit.run.runners.remote_runner.coreml_placement's dict
    """Per-op placement of a model on one compute unit setting: {"available", "ops": [{op, name, function,
    preferred, supported, cost}], "summary"} or {"available": False, "reason"} when this macOS cannot tell."""
    loaded = load(path, compute_units)
    placement = coreml_placement(coreml_compiled_path(loaded.model), loaded.compute_units)
    if placement.get("available"):
        placement["summary"] = summarise_placement(placement["ops"])
    return placement


class DeviceShare(TypedDict):
    ops: int
    estimated_cost: Optional[float]  # sum of Core ML's estimated cost shares; None when it gave none
    op_types: Dict[str, int]


class PlacementSummary(TypedDict):
    ops: int
    by_device: Dict[str, DeviceShare]  # neural_engine, gpu, cpu, undetermined (in that order)
    source: str


class PlacedOp(TypedDict, total=False):
    """One op of ``coreml_placement``'s ``ops`` (the keys the summary reads)."""

    op: str
    preferred: Optional[str]
    cost: Optional[float]


def summarise_placement(ops: Sequence[PlacedOp]) -> PlacementSummary:
    """Counts per preferred device: ops, op types, and the sum of Core ML's estimated cost shares (None when Core
    ML gave no costs, e.g. NeuralNetwork models). Ops without a device are counted as 'undetermined'."""
    by_device: Dict[str, DeviceShare] = {}
    for op in ops:
        device = op.get("preferred") or "undetermined"
        entry = by_device.setdefault(device, {"ops": 0, "estimated_cost": None, "op_types": Counter()})
        entry["ops"] += 1
        entry["op_types"][op.get("op")] += 1
        if op.get("cost") is not None:
            entry["estimated_cost"] = (entry["estimated_cost"] or 0.0) + float(op["cost"])
    order = {"neural_engine": 0, "gpu": 1, "cpu": 2, "undetermined": 3}
    devices = {d: {"ops": e["ops"], "estimated_cost": e["estimated_cost"], "op_types": dict(sorted(e["op_types"].items()))}
               for d, e in sorted(by_device.items(), key=lambda kv: (order.get(kv[0], 9), kv[0]))}
    return {"ops": len(ops), "by_device": devices, "source": PLACEMENT_SOURCE}


def placement_line(summary: Optional[PlacementSummary]) -> str:
    """'neural_engine 12 ops (est. 91%), cpu 2 ops (est. 9%)' for reports."""
    if not summary or not summary.get("by_device"):
        return "–"
    parts = []
    for device, entry in summary["by_device"].items():
        cost = entry.get("estimated_cost")
        parts.append(f"{device} {entry['ops']} op{'s' if entry['ops'] != 1 else ''}"
                     + (f" (est. {cost * 100:.0f}%)" if cost is not None else ""))
    return ", ".join(parts)
