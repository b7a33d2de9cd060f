"""Per-layer tracer for two .tflite models (the metrics and the report are in edgekit.parity.layers).

Both models run on LiteRT with BUILTIN_REF kernels and ``experimental_preserve_all_tensors=True`` (without the
flag most intermediates read back as garbage). Each candidate op output is matched to the reference tensor of the
same name (the MLIR quantizer keeps names); ops whose names differ are aligned by op-type order; QUANTIZE /
DEQUANTIZE ops the quantizer inserted are compared against the reference value of their input and marked
``inserted``. Quantized tensors are dequantized with their own scale / zero point before comparison.
"""
from __future__ import annotations

import difflib
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Hashable, List, Optional, Sequence, Tuple, Union

import numpy as np

from edgekit.calibration.dataset import Sample
from edgekit.errors import InvalidModelError, UserError, first_line
from edgekit.parity.layers import Grid, Trace, TracedTensor
from edgekit.parity.layers_result import LayerRow, TracedModel
from edgekit.provenance import sha256_bytes
from edgekit.quiet import captured_output
from edgekit.tflite_model import TensorInfo, TFLiteModel, _interpreter_module, dequantize, quantize_input

INSERTED_OPS = ("QUANTIZE", "DEQUANTIZE")


def _load(model: Union[str, Path, TFLiteModel]) -> TFLiteModel:
    return model if isinstance(model, TFLiteModel) else TFLiteModel.load(Path(model))


def _debug_interpreter(model: TFLiteModel):
    """BUILTIN_REF kernels (the bit-exact reference) with every intermediate tensor kept."""
    litert = _interpreter_module()
    options = dict(experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF, experimental_preserve_all_tensors=True)
    model.guard_reference_kernels(litert, options)
    try:
        with warnings.catch_warnings(), captured_output((2,)):
            warnings.simplefilter("ignore")
            interp = litert.Interpreter(model_content=model.data, num_threads=1, **options)
            interp.allocate_tensors()
    except (ValueError, RuntimeError) as exc:
        raise InvalidModelError(f"{model.source} cannot be loaded by LiteRT: {first_line(exc, None)}") from exc
    return interp


@dataclass(frozen=True)
class _Pair:
    """One candidate op output and where its float reference value comes from."""

    op_index: int
    op: str
    cand: TensorInfo
    ref: Optional[TensorInfo]
    match: str                     # name | order | inserted | unmatched
    inputs: Tuple[int, ...]        # candidate activation tensors read by the op


def _shapes_agree(a: Sequence[int], b: Sequence[int]) -> bool:
    """Equal shapes; -1 (a dynamic dimension, e.g. the batch) agrees with anything."""
    return len(a) == len(b) and all(x == y or x == -1 or y == -1 for x, y in zip(a, b))


def _check_compatible(ref: TFLiteModel, cand: TFLiteModel) -> None:
    problems = []
    if len(ref.inputs) != len(cand.inputs):
        problems.append(f"{len(ref.inputs)} inputs in {ref.source} but {len(cand.inputs)} in {cand.source}")
    for a, b in zip(ref.inputs, cand.inputs):
        if not _shapes_agree(a.shape, b.shape):
            problems.append(f"input {a.name!r} has shape {list(a.shape)} but {b.name!r} has {list(b.shape)}")
    if len(ref.outputs) != len(cand.outputs):
        problems.append(f"{len(ref.outputs)} outputs in {ref.source} but {len(cand.outputs)} in {cand.source}")
    for a, b in zip(ref.outputs, cand.outputs):
        if not _shapes_agree(a.shape, b.shape):
            problems.append(f"output {a.name!r} has shape {list(a.shape)} but {b.name!r} has {list(b.shape)}")
    if problems:
        raise UserError(
            "per-layer analysis needs two versions of the same network: " + "; ".join(problems),
            fix="pass the float model and the quantized model made from it (model_float.tflite, model_int8.tflite)",
        )


def _same_elements(a: TensorInfo, b: TensorInfo) -> bool:
    return int(np.prod(a.shape)) == int(np.prod(b.shape))


def match_tensors(ref: TFLiteModel, cand: TFLiteModel) -> List[_Pair]:
    """One _Pair per candidate op (its first output), in candidate graph order."""
    ref_by_name: Dict[str, TensorInfo] = {t.name: t for t in ref.inputs}
    for op in ref.ops:
        for o in op.outputs:
            if o >= 0:
                ref_by_name.setdefault(ref.tensor(o).name, ref.tensor(o))
    activations = set(cand.activation_tensors())
    # model inputs pair up by position whatever their names
    cand_to_ref: Dict[int, TensorInfo] = {c.index: r for c, r in zip(cand.inputs, ref.inputs)}
    cand_ops = cand.ops
    pairs: Dict[int, _Pair] = {}
    unmatched: List[int] = []
    for op in cand_ops:
        out = cand.tensor(op.outputs[0])
        inputs = tuple(i for i in op.inputs if i in activations)
        named = ref_by_name.get(out.name)
        if op.name in INSERTED_OPS and (named is None or not _same_elements(named, out)):
            source = cand_to_ref.get(inputs[0]) if inputs else None
            pairs[op.index] = _Pair(op.index, op.name, out, source, "inserted", inputs)
        elif named is not None and _same_elements(named, out):
            pairs[op.index] = _Pair(op.index, op.name, out, named, "name", inputs)
        else:
            pairs[op.index] = _Pair(op.index, op.name, out, None, "unmatched", inputs)
            unmatched.append(op.index)
        if pairs[op.index].ref is not None:
            cand_to_ref[out.index] = pairs[op.index].ref
    if unmatched:
        _align_by_order(ref, cand, pairs, unmatched)
        for op in cand_ops:  # inserted ops behind an op matched by order: take that op's reference now
            p = pairs[op.index]
            if p.ref is not None:
                cand_to_ref[p.cand.index] = p.ref
            elif p.match == "inserted" and p.inputs and p.inputs[0] in cand_to_ref:
                pairs[op.index] = _Pair(p.op_index, p.op, p.cand, cand_to_ref[p.inputs[0]], "inserted", p.inputs)
                cand_to_ref[p.cand.index] = cand_to_ref[p.inputs[0]]
    return [pairs[op.index] for op in cand_ops]


def _align_by_order(ref: TFLiteModel, cand: TFLiteModel, pairs: Dict[int, _Pair], unmatched: List[int]) -> None:
    """Fallback for renamed tensors: align the op-type sequences (inserted ops left out) and pair equal runs."""
    cand_ops = [op for op in cand.ops if op.name not in INSERTED_OPS]
    ref_ops = [op for op in ref.ops if op.name not in INSERTED_OPS]
    taken = {p.ref.index for p in pairs.values() if p.ref is not None and p.match == "name"}
    matcher = difflib.SequenceMatcher(a=[o.name for o in cand_ops], b=[o.name for o in ref_ops], autojunk=False)
    wanted = set(unmatched)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            c, r = cand_ops[block.a + k], ref_ops[block.b + k]
            if c.index not in wanted:
                continue
            out, ref_out = cand.tensor(c.outputs[0]), ref.tensor(r.outputs[0])
            if ref_out.index in taken or not _same_elements(out, ref_out):
                continue
            old = pairs[c.index]
            pairs[c.index] = _Pair(old.op_index, old.op, old.cand, ref_out, "order", old.inputs)
            taken.add(ref_out.index)


def _grid_limits(info: TensorInfo) -> Optional[Grid]:
    """(lowest, highest representable value, step) of a quantized tensor; None for float tensors."""
    if not info.is_quantized or not np.issubdtype(info.dtype, np.integer):
        return None
    q = np.iinfo(info.dtype)
    return info.scale * (q.min - info.zero_point), info.scale * (q.max - info.zero_point), info.scale


def _describe(info: TensorInfo) -> LayerRow:
    quantized = _grid_limits(info) is not None
    return {
        "shape": [int(s) for s in info.shape],
        "dtype": info.dtype.name,
        "scale": info.scale if quantized else "float",
        "zero_point": info.zero_point if quantized else "float",
    }


class TFLiteTrace(Trace):
    """Two .tflite models on LiteRT BUILTIN_REF with every tensor kept; tensors keyed by candidate tensor index."""

    kind = "tflite"
    runtime = "LiteRT BUILTIN_REF kernels, all tensors kept"
    tools = ("ai-edge-litert", "tensorflow-cpu")
    not_applicable: Dict[str, str] = {}

    def __init__(self, ref: TFLiteModel, cand: TFLiteModel) -> None:
        self.ref, self.cand = ref, cand
        self.pairs = match_tensors(ref, cand)
        self._ref_interp = self._cand_interp = None

    def describe(self) -> Tuple[TracedModel, TracedModel]:
        return tuple({"source": m.source, "sha256": sha256_bytes(m.data), "ops": len(m.ops)} for m in (self.ref, self.cand))

    def tensors(self) -> Tuple[List[TracedTensor], List[TracedTensor]]:
        inputs = [TracedTensor(key=info.index, op="input", fields={"tensor": info.name, **_describe(info)},
                               grid=_grid_limits(info)) for info in self.cand.inputs]
        outputs = [TracedTensor(
            key=p.cand.index, op=p.op,
            fields={"index": p.op_index, "op": p.op, "tensor": p.cand.name, **_describe(p.cand), "match": p.match,
                    "reference_tensor": p.ref.name if p.ref is not None else None},
            grid=_grid_limits(p.cand), matched=p.ref is not None, inputs=p.inputs, counted=p.op not in INSERTED_OPS,
        ) for p in self.pairs]
        return inputs, outputs

    def matched_counts(self) -> Dict[str, int]:
        return {m: sum(1 for p in self.pairs if p.match == m) for m in ("name", "order", "inserted", "unmatched")}

    def run(self, sample: Sample) -> Dict[Hashable, Tuple[np.ndarray, np.ndarray]]:
        if self._ref_interp is None:
            self._ref_interp, self._cand_interp = _debug_interpreter(self.ref), _debug_interpreter(self.cand)
        for interp, model in ((self._ref_interp, self.ref), (self._cand_interp, self.cand)):
            for info, value in zip(model.inputs, sample):
                interp.set_tensor(info.index, quantize_input(value, info))
            interp.invoke()
        values: Dict[Hashable, Tuple[np.ndarray, np.ndarray]] = {}
        for info, value in zip(self.cand.inputs, sample):
            values[info.index] = (np.asarray(value, np.float32), dequantize(self._cand_interp.get_tensor(info.index), info))
        for p in self.pairs:
            if p.ref is not None:
                values[p.cand.index] = (dequantize(self._ref_interp.get_tensor(p.ref.index), p.ref),
                                        dequantize(self._cand_interp.get_tensor(p.cand.index), p.cand))
        return values


def trace(reference, candidate) -> TFLiteTrace:
    """Load, check and match two .tflite models (paths or TFLiteModel)."""
    ref, cand = _load(reference), _load(candidate)
    _check_compatible(ref, cand)
    return TFLiteTrace(ref, cand)
