"""The precision plan of a TFLite model, layered global -> op type -> op name (-> fallback).

Every op of the float model gets one precision and the reason it got it:

    global   int8 (or int16 activations with --activations int16, TFLite's 16x8 mode)
    op type  --keep-float SOFTMAX        every op of that builtin type stays float
    op name  --keep-float conv2d_3       the op whose output tensor is that name stays float
    fallback --fallback auto             ops moved to float, one per step, by sensitivity

Op names are the op's first output tensor in the float reference model (what
`--debug` lists in layers.md). A --keep-float value matches an op type (case-insensitive),
else a whole output tensor name, else one name component (split on / ; . :) or the end of one
after ``_``: ``conv2`` or ``Conv2d_conv2`` for ``.../torch.nn.modules.conv.Conv2d_conv2;1``.
A value that matches several ops picks the one op with weights among them (exporters name the
TRANSPOSE/PAD they add for a conv after the conv); otherwise it is an error listing them.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, replace
from typing import Dict, List, Sequence, Tuple

from edgekit.errors import UserError
from edgekit.tflite_model import TFLiteModel

FLOAT = "float32"
INT8 = "int8"
INT16X8 = "int16x8"  # int16 activations, int8 weights, int64 bias

GLOBAL_PRECISION = {"int8": INT8, "int16": INT16X8}
# ops with weights: a name shared with the layout ops an exporter adds for them means the weighted op
COMPUTE_OPS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV", "BATCH_MATMUL"})


@dataclass(frozen=True)
class PlannedOp:
    index: int       # op index in the float reference model
    op: str          # builtin name, e.g. CONV_2D
    tensor: str      # first output tensor name (the op's name)
    precision: str   # int8 | int16x8 | float32
    why: str         # global | op type | op name | fallback


@dataclass(frozen=True)
class ModelOp:
    index: int
    op: str
    tensor: str


def model_ops(model: TFLiteModel) -> List[ModelOp]:
    """Every op of subgraph 0 with its name (first output tensor)."""
    ops = []
    for op in model.ops:
        outputs = [o for o in op.outputs if o >= 0]
        ops.append(ModelOp(op.index, op.name, model.tensor(outputs[0]).name if outputs else f"op#{op.index}"))
    return ops


def _components(name: str) -> List[str]:
    return [p for p in re.split(r"[/;.:]", name) if p]


@dataclass(frozen=True)
class PrecisionPlan:
    """Global default plus op-type, op-name and fallback overrides (all overrides mean float)."""

    default: str = INT8
    float_types: Tuple[str, ...] = ()
    float_names: Tuple[str, ...] = ()        # exact op (output tensor) names from --keep-float
    fallback_names: Tuple[str, ...] = ()     # exact op names moved to float by --fallback
    requested: Tuple[str, ...] = ()          # the --keep-float values as given

    @classmethod
    def build(cls, model: TFLiteModel, activations: str, keep_float: Sequence[str]) -> "PrecisionPlan":
        """Resolve --keep-float values against the model; unknown or ambiguous values -> one UserError."""
        ops = model_ops(model)
        types = sorted({o.op for o in ops})
        float_types: List[str] = []
        float_names: List[str] = []
        problems: List[str] = []
        for value in keep_float:
            kind, resolved, problem = resolve_keep_float(value, ops)
            if problem:
                problems.append(problem)
            elif kind == "type":
                float_types.append(resolved)
            else:
                float_names.append(resolved)
        if problems:
            raise UserError(
                "--keep-float: " + "; ".join(problems),
                fix=f"give an op type of this model ({', '.join(types)}) or an op's output tensor name "
                    "(listed by --debug in layers.md)",
            )
        return cls(GLOBAL_PRECISION[activations], tuple(dict.fromkeys(float_types)), tuple(dict.fromkeys(float_names)),
                   requested=tuple(keep_float))

    def with_fallback(self, name: str) -> "PrecisionPlan":
        return replace(self, fallback_names=self.fallback_names + (name,))

    def resolve(self, ops: Sequence[ModelOp]) -> List[PlannedOp]:
        """One PlannedOp per op; the most specific layer wins (name > type > global), fallback last."""
        planned = []
        for o in ops:
            precision, why = self.default, "global"
            if o.op in self.float_types:
                precision, why = FLOAT, "op type"
            if o.tensor in self.float_names:
                precision, why = FLOAT, "op name"
            if precision != FLOAT and o.tensor in self.fallback_names:
                precision, why = FLOAT, "fallback"
            planned.append(PlannedOp(o.index, o.op, o.tensor, precision, why))
        return planned

    def float_tensors(self, ops: Sequence[ModelOp]) -> List[str]:
        """Names of every op the plan keeps in float (the quantizer's denylisted_nodes)."""
        return [p.tensor for p in self.resolve(ops) if p.precision == FLOAT]

    @property
    def mixed(self) -> bool:
        return bool(self.float_types or self.float_names or self.fallback_names)

    def to_json(self) -> dict:
        return {
            "global": self.default,
            "op_types_float": list(self.float_types),
            "op_names_float": list(self.float_names),
            "fallback_float": list(self.fallback_names),
            "keep_float_requested": list(self.requested),
        }


def _component_hits(value: str, ops: Sequence[ModelOp]) -> List[ModelOp]:
    """Ops with a name component equal to ``value``, else ending in ``_value`` (torch: ``Conv2d_conv2``)."""
    v = value.lower()
    exact = [o for o in ops if v in (c.lower() for c in _components(o.tensor))]
    if exact:
        return exact
    return [o for o in ops if any(c.lower().endswith("_" + v) for c in _components(o.tensor))]


def _picked(value: str, ops: Sequence[ModelOp]) -> List[ModelOp]:
    hits = _component_hits(value, ops)
    compute = [o for o in hits if o.op in COMPUTE_OPS]
    if len(hits) > 1 and len(compute) == 1:  # "conv1" also names the input TRANSPOSE/PAD made for conv1
        return compute
    return hits


def resolve_keep_float(value: str, ops: Sequence[ModelOp]) -> Tuple[str, str, str]:
    """(kind 'type'|'name', resolved value, problem or '') for one --keep-float value."""
    types = sorted({o.op for o in ops})
    if value.upper() in types:
        return "type", value.upper(), ""
    if value in [o.tensor for o in ops]:
        return "name", value, ""
    hits = _picked(value, ops)
    if len(hits) == 1:
        return "name", hits[0].tensor, ""
    if len(hits) > 1:
        listed = ", ".join(f"op #{o.index} {o.op} '{o.tensor}'" for o in hits[:6])
        return "", "", f"{value!r} matches {len(hits)} ops ({listed}); give the whole tensor name"
    close = difflib.get_close_matches(value.lower(), list(_unique_handles(ops)), n=5, cutoff=0.5)
    hint = f"; close: {', '.join(_unique_handles(ops)[c] for c in close)}" if close else ""
    return "", "", f"{value!r} is neither an op type nor an op name of this model{hint}"


def _unique_handles(ops: Sequence[ModelOp]) -> Dict[str, str]:
    """{lowercase: spelling} of every op type and every name component that picks exactly one op."""
    handles = {t.lower(): t for t in sorted({o.op for o in ops})}
    for o in ops:
        parts = set(_components(o.tensor))
        for c in sorted(parts | {p.rsplit("_", 1)[1] for p in parts if "_" in p.strip("_")}):
            if c.lower() not in handles and len(_picked(c, ops)) == 1:
                handles[c.lower()] = c
    return handles


def plan_table(planned: Sequence[PlannedOp]) -> List[str]:
    """Markdown table: op, type, precision, why."""
    lines = ["| # | op (output tensor) | type | precision | why |", "|---|---|---|---|---|"]
    for p in planned:
        lines.append(f"| {p.index} | `{p.tensor}` | {p.op} | {p.precision} | {p.why} |")
    return lines
