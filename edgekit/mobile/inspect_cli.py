"""`edgekit inspect MODEL.tflite`: metadata, inputs/outputs and operators of any .tflite, ours or not."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Callable, Dict, List, Optional

from typing_extensions import TypedDict

from edgekit.console import say
from edgekit.errors import InvalidModelError
from edgekit.mobile.tflite_metadata import PackedMetadata
from edgekit.results import JsonObject


def register(subparsers) -> Dict[str, Callable]:
    p = subparsers.add_parser("inspect", help="print a .tflite model's metadata, inputs/outputs and operators")
    p.add_argument("model", type=Path, help="a .tflite file")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    return {"inspect": cmd_inspect}


class TensorLine(TypedDict, total=False):
    name: str
    shape: List[int]
    dtype: str
    scale: float      # quantized tensors only
    zero_point: int


class TFLiteDescription(TypedDict):
    """What `edgekit inspect` prints (as JSON with --json)."""

    path: str
    bytes: int
    inputs: List[TensorLine]
    outputs: List[TensorLine]
    ops: List[str]
    op_counts: Dict[str, int]
    metadata: Optional[JsonObject]  # the TFLITE_METADATA flatbuffer as plain data (PackedMetadata.metadata)
    packed_files: List[str]
    labels: Optional[List[str]]


def describe_tflite(path: Path) -> TFLiteDescription:
    from edgekit.mobile.tflite_metadata import packed_files, read_metadata
    from edgekit.tflite_model import TFLiteModel

    if not Path(path).is_file():
        raise InvalidModelError(f"{path} does not exist or is not a file", fix="pass a .tflite file")
    model = TFLiteModel.load(path)
    data = model.data

    def tensor(t) -> TensorLine:
        out: TensorLine = {"name": t.name, "shape": list(t.shape), "dtype": str(t.dtype)}
        if t.is_quantized:
            out.update(scale=t.scale, zero_point=t.zero_point)
        return out

    ops = [o.name for o in model.ops]
    metadata = read_metadata(data)
    return {
        "path": str(path), "bytes": len(data),
        "inputs": [tensor(t) for t in model.inputs], "outputs": [tensor(t) for t in model.outputs],
        "ops": ops, "op_counts": dict(Counter(ops)),
        "metadata": metadata["metadata"] if metadata else None,
        "packed_files": sorted((metadata or {}).get("files", {}) or packed_files(data)),
        "labels": _labels(metadata),
    }


def _labels(metadata: Optional[PackedMetadata]) -> Optional[List[str]]:
    if not metadata:
        return None
    text = metadata["files"].get("labels.txt")
    return [line for line in text.splitlines() if line.strip()] if text else None


def _print(info: TFLiteDescription) -> None:
    say(f"{info['path']} ({info['bytes']:,} bytes)")
    meta = info["metadata"]
    if meta is None:
        say("metadata: none (no TFLITE_METADATA; `edgekit quantize` writes it)")
    else:
        for key in ("name", "description", "version", "author", "license", "minParserVersion"):
            if meta.get(key):
                say(f"  {key}: {meta[key]}")
    sub = ((meta or {}).get("subgraphMetadata") or [{}])[0]
    for kind, tensors, described in (("input", info["inputs"], sub.get("inputTensorMetadata") or []),
                                     ("output", info["outputs"], sub.get("outputTensorMetadata") or [])):
        for i, t in enumerate(tensors):
            quant = f" scale={t['scale']:.6g} zero_point={t['zero_point']}" if "scale" in t else ""
            say(f"{kind} {i}: {t['name']} {t['dtype']} {t['shape']}{quant}")
            if i < len(described):
                d = described[i]
                if d.get("description"):
                    say(f"    {d['description']}")
                for unit in d.get("processUnits") or []:
                    opts = unit.get("options") or {}
                    if "mean" in opts:
                        say(f"    normalization: mean {opts['mean']} std {opts.get('std')} (on 0..255 pixels)")
    if info["labels"]:
        shown = ", ".join(info["labels"][:10]) + (", ..." if len(info["labels"]) > 10 else "")
        say(f"labels ({len(info['labels'])}): {shown}")
    if info["packed_files"]:
        say("packed files: " + ", ".join(info["packed_files"]))
    say(f"ops ({len(info['ops'])}): " + ", ".join(f"{name} x{n}" for name, n in info["op_counts"].items()))


def cmd_inspect(args) -> int:
    info = describe_tflite(args.model)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        _print(info)
    return 0
