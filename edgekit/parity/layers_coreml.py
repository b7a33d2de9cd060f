"""Per-layer tracer for a float32 .mlpackage and its quantized version (metrics and report: edgekit.parity.layers).

Both ML Programs run on edgekit's numpy MIL evaluator (``MILProgram.predict(feeds, keep_intermediates=True)``; no
Core ML runtime is needed, so this works on Linux). One row per candidate op (quantize / dequantize / cast /
classify and constant-only ops are not rows): the value compared is what the next op reads, i.e. the
``dequantize(quantize(T))`` behind T when T is requantized (W8A8; grid, scale and zero point from that quantize,
following a ``cast`` in between), T itself otherwise (W8: fp16 compute, a float row whose op reads int8 weights).

Matching: coremltools keeps the torch-side variable names; its fp16 pass renames a variable T of the float32 program
to ``T_cast_fp16`` in an fp16 program, which counts as a name match. A variable renamed otherwise (the last op when
its name is taken by the output cast: ``linear`` -> ``linear_0_cast_fp16``) is matched by op-type order.
Model inputs pair by position.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Hashable, List, Optional, Sequence, Set, Tuple

import numpy as np

from edgekit.calibration.dataset import Sample
from edgekit.errors import UserError
from edgekit.parity.layers import Grid, ProgressFactory, Trace, TracedTensor, compare_trace, LayerReport
from edgekit.parity.layers_result import LayerRow, TracedModel
from edgekit.provenance import sha256_file

NOT_ROWS = ("quantize", "dequantize", "cast", "classify")
FLOAT_DTYPES = {10: "fp16", 11: "fp32", 12: "fp64"}
INT_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535)}
FP16_SUFFIX = "_cast_fp16"
CONV_LIKE_RANK = (3, 4, 5)
FeedsFn = Callable[[Sample], Dict[str, np.ndarray]]


@dataclass(frozen=True)
class _Rounding:
    dequantized: str
    dtype: str
    scale: Optional[float]
    zero_point: Optional[int]
    grid: Optional[Grid]


class _Program:
    """An ML Program read for tracing: ops in order, consumers, constants, quantize parameters."""

    def __init__(self, path: Path) -> None:
        from edgekit.coreml.evaluator import MILProgram

        self.path = Path(path)
        self.program = MILProgram.load(self.path)
        self.program.check_supported()
        self.ops = self.program.operations
        self.qparams = self.program.quantization_parameters()
        self.consumers: Dict[str, list] = {}
        self.producers: Dict[str, object] = {}
        self.types: Dict[str, object] = {}
        self.constants: Set[str] = set()
        for op in self.ops:
            names = self.read(op)
            for name in names:
                self.consumers.setdefault(name, []).append(op)
            for name, ttype in op.outputs:
                self.producers[name] = op
                self.types[name] = ttype
            if op.op_type == "const" or op.op_type.startswith("constexpr_") or (names and all(n in self.constants for n in names)):
                self.constants.update(n for n, _ in op.outputs)

    @staticmethod
    def read(op) -> List[str]:
        return [item for bindings in op.inputs.values() for kind, item in bindings if kind == "name"]

    def rounding(self, tensor: str) -> Optional[_Rounding]:
        """The quantize -> dequantize after ``tensor`` (through casts), if any."""
        for op in self.consumers.get(tensor, []):
            if op.op_type == "cast":
                found = self.rounding(op.outputs[0][0])
                if found is not None:
                    return found
            elif op.op_type == "quantize":
                for dq in self.consumers.get(op.outputs[0][0], []):
                    if dq.op_type == "dequantize":
                        return self._describe(op, dq)
        return None

    def _describe(self, q, dq) -> _Rounding:
        p = self.qparams.get(q.index, {})
        dtype = p.get("output_dtype") or "int8"
        scale, zp = p.get("scale"), p.get("zero_point")
        if scale is None or np.size(scale) != 1 or (zp is not None and np.size(zp) != 1) or dtype not in INT_RANGES:
            return _Rounding(dq.outputs[0][0], dtype, None, None, None)
        s = float(np.asarray(scale, np.float64).reshape(()))
        z = int(np.asarray(zp).reshape(())) if zp is not None else 0
        lo, hi = INT_RANGES[dtype]
        return _Rounding(dq.outputs[0][0], dtype, s, z, (s * (lo - z), s * (hi - z), s))

    def consumed(self, tensor: str) -> str:
        r = self.rounding(tensor)
        return r.dequantized if r is not None else tensor

    def compute_ops(self) -> list:
        return [op for op in self.ops
                if op.op_type not in NOT_ROWS and op.op_type != "const" and not op.op_type.startswith("constexpr_")
                and op.outputs and op.outputs[0][0] not in self.constants and op.outputs[0][1].dtype in FLOAT_DTYPES]

    def shape(self, name: str) -> Optional[List[int]]:
        t = self.types.get(name)
        return list(t.shape) if t is not None and t.shape is not None else None

    def int_weights(self, op) -> bool:
        """The op reads weights stored as integers (constexpr_* or a dequantize of a constant)."""
        for name in self.read(op):
            p = self.producers.get(name)
            if p is not None and name in self.constants and (p.op_type.startswith("constexpr_") or p.op_type == "dequantize"):
                return True
        return False


@dataclass(frozen=True)
class _Row:
    op: object
    tensor: str
    reference: Optional[str]
    match: str


def _sizes_agree(a: Optional[List[int]], b: Optional[List[int]]) -> bool:
    if a is None or b is None:
        return True
    return int(np.prod(a)) == int(np.prod(b))


def match_ops(ref: _Program, cand: _Program) -> List[_Row]:
    """One _Row per candidate compute op: by variable name (``T`` or ``T_cast_fp16``), then op-type order."""
    ref_ops = ref.compute_ops()
    ref_names = {op.outputs[0][0] for op in ref_ops}
    rows = []
    for op in cand.compute_ops():
        t = op.outputs[0][0]
        base = t[: -len(FP16_SUFFIX)] if t.endswith(FP16_SUFFIX) else t
        target = t if t in ref_names else (base if base in ref_names else None)
        if target is not None and _sizes_agree(ref.shape(target), cand.shape(t)):
            rows.append(_Row(op, t, target, "name"))
        else:
            rows.append(_Row(op, t, None, "unmatched"))
    if any(r.reference is None for r in rows):
        taken = {r.reference for r in rows if r.reference is not None}
        matcher = difflib.SequenceMatcher(a=[r.op.op_type for r in rows], b=[o.op_type for o in ref_ops], autojunk=False)
        for block in matcher.get_matching_blocks():
            for k in range(block.size):
                row, target = rows[block.a + k], ref_ops[block.b + k].outputs[0][0]
                if row.reference is None and target not in taken and _sizes_agree(ref.shape(target), cand.shape(row.tensor)):
                    rows[block.a + k] = _Row(row.op, row.tensor, target, "order")
                    taken.add(target)
    return rows


def _check_compatible(ref: _Program, cand: _Program) -> None:
    problems = []
    a_in, b_in = ref.program.inputs, cand.program.inputs
    if len(a_in) != len(b_in):
        problems.append(f"{len(a_in)} inputs in {ref.path} but {len(b_in)} in {cand.path}")
    for a, b in zip(a_in, b_in):
        if tuple(a.shape) != tuple(b.shape):
            problems.append(f"input {a.name!r} has shape {list(a.shape)} but {b.name!r} has {list(b.shape)}")
    if len(ref.program.outputs) != len(cand.program.outputs):
        problems.append(f"{len(ref.program.outputs)} outputs in {ref.path} but {len(cand.program.outputs)} in {cand.path}")
    if problems:
        raise UserError(
            "per-layer analysis needs two versions of the same network: " + "; ".join(problems),
            fix="pass the float program and the quantized one made from it (model_float.mlpackage, model_w8a8.mlpackage)",
        )


def _channel_axis(shape: Optional[List[int]]) -> int:
    return 1 if shape is not None and len(shape) in CONV_LIKE_RANK else -1


def _describe(q: Optional[_Rounding], shape: Optional[List[int]], dtype: str) -> LayerRow:
    if q is None:
        return {"shape": shape, "dtype": dtype, "scale": "float", "zero_point": "float"}
    return {"shape": shape, "dtype": q.dtype, "scale": q.scale if q.scale is not None else "per-axis",
            "zero_point": q.zero_point if q.zero_point is not None else "per-axis"}


class CoreMLTrace(Trace):
    """A float32 and a quantized ML Program on the numpy MIL evaluator; tensors keyed by candidate variable name."""

    kind = "mlpackage"
    runtime = ("edgekit numpy MIL evaluator, every variable kept (fp16 programs rounded to fp16 after each op); each op "
               "output compared after its quantize -> dequantize (what the next op reads)")
    tools = ("coremltools",)
    not_applicable: Dict[str, str] = {}

    def __init__(self, ref: _Program, cand: _Program, to_feeds: Optional[FeedsFn] = None) -> None:
        self.ref, self.cand = ref, cand
        self.rows = match_ops(ref, cand)
        self.to_feeds = to_feeds

    def describe(self) -> Tuple[TracedModel, TracedModel]:
        return tuple({"source": str(p.path), "sha256": sha256_file(p.path), "ops": len(p.compute_ops())}
                     for p in (self.ref, self.cand))

    def tensors(self) -> Tuple[List[TracedTensor], List[TracedTensor]]:
        inputs = []
        for spec in self.cand.program.inputs:
            q = self.cand.rounding(spec.name)
            inputs.append(TracedTensor(key=spec.name, op="input",
                                       fields={"tensor": spec.name, **_describe(q, list(spec.shape), str(spec.dtype))},
                                       grid=q.grid if q else None, channel_axis=_channel_axis(list(spec.shape))))
        aliases = {}
        for name in [i.name for i in self.cand.program.inputs] + [r.tensor for r in self.rows]:
            q = self.cand.rounding(name)
            if q is not None:
                aliases[q.dequantized] = name
        outputs = []
        for r in self.rows:
            q = self.cand.rounding(r.tensor)
            shape = self.cand.shape(r.tensor)
            fields = {"index": r.op.index, "op": r.op.op_type, "tensor": r.tensor,
                      **_describe(q, shape, FLOAT_DTYPES[r.op.outputs[0][1].dtype]), "match": r.match,
                      "reference_tensor": r.reference, "compared_tensor": q.dequantized if q else r.tensor}
            reads = tuple(dict.fromkeys(aliases.get(n, self._through_casts(n)) for n in self.cand.read(r.op)
                                        if n not in self.cand.constants))
            outputs.append(TracedTensor(key=r.tensor, op=r.op.op_type, fields=fields, grid=q.grid if q else None,
                                        matched=r.reference is not None, inputs=reads, channel_axis=_channel_axis(shape),
                                        int_weights=self.cand.int_weights(r.op)))
        return inputs, outputs

    def _through_casts(self, name: str) -> str:
        """An op reading a cast of a row's output reads that row (the input cast to fp16, the fp32 output cast)."""
        p = self.cand.producers.get(name)
        while p is not None and p.op_type == "cast":
            name = self.cand.read(p)[0]
            p = self.cand.producers.get(name)
        return name

    def matched_counts(self) -> Dict[str, int]:
        return {m: sum(1 for r in self.rows if r.match == m) for m in ("name", "order", "unmatched")}

    def _feeds(self, program: _Program, sample: Sample) -> Dict[str, np.ndarray]:
        if self.to_feeds is not None:
            return self.to_feeds(sample)
        return {spec.name: np.asarray(value) for spec, value in zip(program.program.inputs, sample)}

    def run(self, sample: Sample) -> Dict[Hashable, Tuple[np.ndarray, np.ndarray]]:
        ref_feeds, cand_feeds = self._feeds(self.ref, sample), self._feeds(self.cand, sample)
        ref_env = self.ref.program.predict(ref_feeds, keep_intermediates=True)
        cand_env = self.cand.program.predict(cand_feeds, keep_intermediates=True)
        values: Dict[Hashable, Tuple[np.ndarray, np.ndarray]] = {}
        for spec in self.cand.program.inputs:
            values[spec.name] = (np.asarray(cand_feeds[spec.name], np.float32),
                                 np.asarray(cand_env[self.cand.consumed(spec.name)], np.float32))
        for r in self.rows:
            if r.reference is not None:
                values[r.tensor] = (np.asarray(ref_env[self.ref.consumed(r.reference)], np.float32),
                                    np.asarray(cand_env[self.cand.consumed(r.tensor)], np.float32))
        return values


def trace(reference, candidate, *, to_feeds: Optional[FeedsFn] = None) -> CoreMLTrace:
    """Load, check and match two .mlpackage programs. ``to_feeds`` turns a sample into program feeds (default: the
    sample's arrays in input order, as ``edgekit parity`` feeds an .mlpackage)."""
    ref, cand = _Program(Path(reference)), _Program(Path(candidate))
    _check_compatible(ref, cand)
    return CoreMLTrace(ref, cand, to_feeds)


def per_layer_report_for_packages(reference: Path, candidate: Path, samples: Sequence[Sample], *,
                                  to_feeds: Optional[FeedsFn] = None, progress: Optional[ProgressFactory] = None,
                                  max_samples: int = 64) -> LayerReport:
    """per_layer_report for two .mlpackage programs fed through ``to_feeds`` (image inputs: pixels)."""
    from edgekit.parity.layers import _check_matched

    if not samples:
        raise UserError("per-layer analysis got no samples", fix="pass --data with at least one sample")
    traced = trace(reference, candidate, to_feeds=to_feeds)
    _check_matched(traced)
    return compare_trace(traced, samples, progress=progress, max_samples=max_samples)
