"""Constant folding of a float .tflite before calibration: ops whose inputs are all constant become constants.

MediaPipe (and TFLiteConverter with ``supported_types=[tf.float16]``) store weights as float16 with one DEQUANTIZE
per weight; sparse models add DENSIFY; some graphs compute a constant with other ops (a RESHAPE or TRANSPOSE of a
weight). Those op outputs are not activations: calibrated as activations they look degenerate (a zero bias has
peak |value| 0), and TF's MLIR quantizer leaves float16 weights unquantized. Folding evaluates every such op once
with LiteRT's own kernels (so the values are exactly what LiteRT computes at run time: DEQUANTIZE float16 ->
float32 is exact, DENSIFY only rearranges), stores the results as float32 (or their own type) constants, and
removes the ops and the constants only they read.

Only subgraph 0 is folded; stateful and control-flow ops are never folded, nor ops that write a graph output.
"""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Sequence, Set

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from edgekit.errors import InvalidModelError

log = logging.getLogger(__name__)

_BUILTIN_NAMES = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
# Ops whose output is not a pure function of their (constant) inputs, or that run other subgraphs.
_NEVER_FOLD = {
    "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE", "CALL", "IF", "WHILE", "CUSTOM",
    "RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL", "MULTINOMIAL", "HASHTABLE", "HASHTABLE_FIND", "HASHTABLE_IMPORT",
    "HASHTABLE_SIZE", "STABLEHLO_RNG_BIT_GENERATOR", "DELEGATE", "PLACEHOLDER_FOR_GREATER_OP_CODES",
    "UNIDIRECTIONAL_SEQUENCE_LSTM", "UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_LSTM",
    "BIDIRECTIONAL_SEQUENCE_RNN", "LSTM", "RNN", "SVDF",
}
_NUMPY_TYPES = {
    np.dtype(np.float32): schema.TensorType.FLOAT32, np.dtype(np.int32): schema.TensorType.INT32,
    np.dtype(np.int64): schema.TensorType.INT64, np.dtype(np.int8): schema.TensorType.INT8,
    np.dtype(np.uint8): schema.TensorType.UINT8, np.dtype(np.int16): schema.TensorType.INT16,
    np.dtype(np.bool_): schema.TensorType.BOOL, np.dtype(np.float16): schema.TensorType.FLOAT16,
}


@dataclass(frozen=True)
class FoldResult:
    """The folded model and what was folded (op name -> count)."""

    data: bytes
    folded: Dict[str, int]

    @property
    def note(self) -> str:
        if not self.folded:
            return ""
        ops = ", ".join(f"{n} {name}" for name, n in sorted(self.folded.items(), key=lambda kv: -kv[1]))
        return f"constant subgraphs folded into float32 constants before calibration ({ops})"


def _op_name(model, op) -> str:
    code = model.operatorCodes[op.opcodeIndex]
    builtin = max(int(code.builtinCode), int(code.deprecatedBuiltinCode))
    return _BUILTIN_NAMES.get(builtin, f"BUILTIN_{builtin}")


def _has_data(model, tensor) -> bool:
    return 0 < tensor.buffer < len(model.buffers) and model.buffers[tensor.buffer].data is not None \
        and len(model.buffers[tensor.buffer].data) > 0


def foldable_ops(model) -> List[int]:
    """Indices of subgraph-0 ops whose inputs are all constant (transitively), in graph order."""
    sub = model.subgraphs[0]
    constant: Set[int] = {i for i, t in enumerate(sub.tensors) if _has_data(model, t)}
    graph_outputs = set(int(o) for o in (sub.outputs if sub.outputs is not None else []))
    found: List[int] = []
    for k, op in enumerate(sub.operators or []):
        inputs = [int(i) for i in (op.inputs if op.inputs is not None else []) if i >= 0]
        outputs = [int(o) for o in (op.outputs if op.outputs is not None else []) if o >= 0]
        if not inputs or not outputs or _op_name(model, op) in _NEVER_FOLD:
            continue
        if op.intermediates is not None and len(op.intermediates):
            continue
        if set(outputs) & graph_outputs or not all(i in constant for i in inputs):
            continue
        found.append(k)
        constant.update(outputs)
    return found


def _evaluate(model, ops: Sequence[int], data_label: str) -> Dict[int, np.ndarray]:
    """Values of the outputs of ``ops``, computed by LiteRT on a model holding only those ops."""
    from edgekit.export.tflite_source import pack_model
    from edgekit.tflite_model import _interpreter_module

    sub = model.subgraphs[0]
    outputs = [int(o) for k in ops for o in sub.operators[k].outputs if o >= 0]
    original = (sub.operators, sub.inputs, sub.outputs, model.signatureDefs, model.metadata)
    sub.operators = [sub.operators[k] for k in ops]
    sub.inputs, sub.outputs, model.signatureDefs, model.metadata = [], outputs, None, None
    try:
        probe = pack_model(model)
    finally:
        sub.operators, sub.inputs, sub.outputs, model.signatureDefs, model.metadata = original
    litert = _interpreter_module()
    try:
        interp = litert.Interpreter(model_content=probe, num_threads=1,
                                    experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                                    experimental_preserve_all_tensors=True)
        interp.allocate_tensors()
        interp.invoke()
        return {o: np.array(interp.get_tensor(o)) for o in outputs}
    except (ValueError, RuntimeError) as exc:
        raise InvalidModelError(
            f"{data_label}: LiteRT could not evaluate its {len(ops)} constant op(s) (DEQUANTIZE/DENSIFY of weights): "
            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}",
            fix="the file is corrupt or uses a weight encoding this LiteRT version lacks; re-export it with float32 weights",
        ) from exc


def fold_constants(data: bytes, label: str = "model") -> FoldResult:
    """Fold every constant subgraph of subgraph 0 (see the module docstring). Unchanged bytes when none exists."""
    from edgekit.export.tflite_source import pack_model

    model = schema.ModelT.InitFromPackedBuf(data, 0)
    if not model.subgraphs:
        return FoldResult(data, {})
    ops = foldable_ops(model)
    if not ops:
        return FoldResult(data, {})
    sub = model.subgraphs[0]
    folded = Counter(_op_name(model, sub.operators[k]) for k in ops)
    values = _evaluate(model, ops, label)
    for index, value in values.items():
        tensor = sub.tensors[index]
        if value.dtype not in _NUMPY_TYPES:
            raise InvalidModelError(f"{label}: constant op output '{_name(tensor)}' has type {value.dtype}, "
                                    "which edgekit cannot store", fix="re-export the model with float32 weights")
        buffer = schema.BufferT()
        buffer.data = np.frombuffer(np.ascontiguousarray(value).tobytes(), dtype=np.uint8)
        model.buffers.append(buffer)
        tensor.buffer = len(model.buffers) - 1
        tensor.type = _NUMPY_TYPES[value.dtype]
        tensor.shape = list(value.shape)
        tensor.shapeSignature = None
        tensor.sparsity = None
    removed = set(ops)
    sub.operators = [op for k, op in enumerate(sub.operators) if k not in removed]
    _drop_unused_tensors(model)
    log.info("%s: folded %d constant op(s) into constants (%s)", label, len(ops), dict(folded))
    return FoldResult(pack_model(model), dict(folded))


def _name(tensor) -> str:
    return tensor.name.decode() if isinstance(tensor.name, bytes) else str(tensor.name)


def _drop_unused_tensors(model) -> None:
    """Remove subgraph-0 tensors no op or graph I/O uses, renumber the rest and empty the buffers they alone held."""
    sub = model.subgraphs[0]
    used: Set[int] = set(int(i) for i in (sub.inputs if sub.inputs is not None else []))
    used.update(int(o) for o in (sub.outputs if sub.outputs is not None else []))
    for op in sub.operators:
        for field in (op.inputs, op.outputs, op.intermediates):
            used.update(int(i) for i in (field if field is not None else []) if i >= 0)
    keep = sorted(used)
    remap = {old: new for new, old in enumerate(keep)}
    kept_buffers = {sub.tensors[i].buffer for i in keep}
    for s in model.subgraphs[1:]:
        kept_buffers.update(t.buffer for t in (s.tensors or []))
    kept_buffers.update(m.buffer for m in (model.metadata or []))
    for i, tensor in enumerate(sub.tensors):
        if i not in remap and tensor.buffer not in kept_buffers and 0 < tensor.buffer < len(model.buffers):
            model.buffers[tensor.buffer].data = None
    sub.tensors = [sub.tensors[i] for i in keep]

    def mapped(values) -> List[int]:
        return [remap[int(v)] if v >= 0 else int(v) for v in (values if values is not None else [])]

    sub.inputs, sub.outputs = mapped(sub.inputs), mapped(sub.outputs)
    for op in sub.operators:
        op.inputs, op.outputs = mapped(op.inputs), mapped(op.outputs)
        if op.intermediates is not None:
            op.intermediates = mapped(op.intermediates)
    for signature in model.signatureDefs or []:
        if signature.subgraphIndex != 0:
            continue
        for entry in list(signature.inputs or []) + list(signature.outputs or []):
            entry.tensorIndex = remap[int(entry.tensorIndex)]

