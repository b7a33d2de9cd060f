"""TF's MLIR quantizer failures as one message: where (op and tensor of the float model), why, and the fix.

mlir_quantize raises a bare RuntimeError (often with an empty message) and prints MLIR diagnostics to stderr:
``loc("model/conv/MatMul"): error: 'tfl.sub' op failed to verify that ...``, ``error: scale out of expressed type
range [...]``, sometimes followed by ``note: see current operation: %3 = "tfl.sub"(...) : (tensor<...>) -> ...``
(raw MLIR, never shown to the user). The known causes are matched to a fix; anything else still names the
location and suggests keeping that op in float.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from edgekit.tflite_graph import Graph

# loc("name"), loc(fused["a", "b"]), loc(callsite("a" at "b")), or no location; then error: message
_DIAGNOSTIC = re.compile(r'^(?:(?P<loc>loc\(.*?\))\s*:\s*)?error:\s*(?P<message>.+?)\s*$')
_LOC_NAME = re.compile(r'"([^"]+)"')
_MLIR_OP = re.compile(r"'(?:tfl|tf|quantfork|quant|arith|func)\.([A-Za-z_0-9]+)' op\s+")


@dataclass(frozen=True)
class Diagnostic:
    """One MLIR error line: the location names (tensor names of the float model), the MLIR op and the message."""

    names: Tuple[str, ...]
    mlir_op: str          # e.g. "sub" for 'tfl.sub' ("" when the line names none)
    message: str          # the error text without the op prefix


@dataclass(frozen=True)
class Cause:
    why: str
    fix: str


_FLOAT16 = Cause(
    why="float16 weights (DEQUANTIZE ops on float16 constants) reached TF's int8 quantizer, which cannot type them",
    fix="quantize the float .tflite with `edgekit quantize` (it folds DEQUANTIZE/DENSIFY of constants into float32 "
        "weights first), or re-export the model with float32 weights",
)
_KNOWN: Sequence[Tuple[re.Pattern, Cause]] = (
    (re.compile(r"scale out of expressed type range \[5\.96"), _FLOAT16),
    (re.compile(r"operands have same element type|same element type|requires the same element type"), _FLOAT16),
    (re.compile(r"requires (?:same|compatible) (?:shape|scale)|quantization parameters"), Cause(
        why="the op's inputs or outputs need equal quantization scales the calibrated ranges do not give",
        fix="keep the op in float with --keep-float NAME, or calibrate with more representative data",
    )),
)


def parse_diagnostics(text: str) -> List[Diagnostic]:
    """The ``error:`` lines of an MLIR diagnostic dump, in order (notes and raw MLIR are skipped)."""
    found: List[Diagnostic] = []
    for line in text.splitlines():
        match = _DIAGNOSTIC.match(line.strip())
        if not match:
            continue
        message = match.group("message")
        op_match = _MLIR_OP.match(message)
        mlir_op = op_match.group(1) if op_match else ""
        if op_match:
            message = message[op_match.end():]
        names = tuple(_LOC_NAME.findall(match.group("loc") or ""))
        found.append(Diagnostic(names, mlir_op, message))
    return found


def _float_op(graph: Optional[Graph], names: Sequence[str]) -> str:
    """'FULLY_CONNECTED op #12' for the float-model op writing (or else reading) the tensor a location names (a
    location name is one part of TFLite's ';'-joined tensor names; MLIR also names an op after its weight)."""
    if graph is None:
        return ""
    wanted = set(names)

    def named(index: int) -> bool:
        return 0 <= index < len(graph.tensors) and bool(wanted & set(graph.tensors[index].name.split(";")))

    for role, field in (("", "outputs"), ("reading it: ", "inputs")):
        for op in graph.ops:
            if any(named(i) for i in getattr(op, field)):
                return f"{role}{op.label} op #{op.index}"
    return ""


def explain(text: str, graph: Optional[Graph] = None, *, kind: str = "int8") -> Tuple[str, str]:
    """(message, fix) for a quantizer failure whose stderr/exception text is ``text``; ``graph``: the float model."""
    diagnostics = parse_diagnostics(text)
    if not diagnostics:
        first = next((l.strip() for l in text.splitlines() if l.strip() and not l.startswith(("W0000", "I0000"))), "")
        return (f"the TFLite {kind} quantizer failed without a diagnostic{': ' + first[:200] if first else ''}",
                "run with --verbose for the converter log; keep the failing layer in float with --keep-float NAME")
    located = next((d for d in diagnostics if d.names), diagnostics[0])
    where = ""
    if located.names:
        op = _float_op(graph, located.names)
        where = f" at tensor '{located.names[0]}'" + (f" ({op})" if op else "")
    what = f"MLIR op tfl.{located.mlir_op}: " if located.mlir_op else ""
    details = "; ".join(dict.fromkeys(d.message for d in diagnostics))
    cause = next((c for pattern, c in _KNOWN if any(pattern.search(d.message) for d in diagnostics)), None)
    if cause is None:
        keep = f" --keep-float {located.names[0]}" if located.names else " --keep-float NAME"
        return (f"the TFLite {kind} quantizer failed{where}: {what}{details}",
                f"keep that op in float with{keep} (the model then needs a runtime with float kernels), or replace "
                "the layer")
    return f"the TFLite {kind} quantizer failed{where}: {what}{details}. Cause: {cause.why}", cause.fix
