"""Per-layer tracer for a float .onnx and its QDQ version (the metrics and the report are in edgekit.parity.layers).

Both models run on onnxruntime (CPU, one thread) with graph optimizations off (ORT_DISABLE_ALL), so QuantizeLinear /
DequantizeLinear pairs are not fused away and every tensor keeps its name; the tensors compared are added as graph
outputs on a copy of each model. A QDQ model simulates int8 in float: each op computes in float on dequantized
inputs, and its output T is rounded by a following QuantizeLinear -> DequantizeLinear. One row per candidate op
(QuantizeLinear / DequantizeLinear and constant-only ops are not rows): the value compared is what the next op
consumes, i.e. DequantizeLinear(QuantizeLinear(T)) when T is requantized (grid and scale / zero point from that
QuantizeLinear), T itself otherwise (a float row). The same rule applies to the reference, so a float model gives T.

Matching: onnxruntime.quantization keeps the op's output name when the op stays (T, then T_QuantizeLinear_Output /
T_DequantizeLinear_Output); when it fuses Conv+Relu the Conv writes the Relu's output name, which matches the
reference Relu output (what the fused op computes). NNCF keeps op output names too (q_output_T_1 / dq_output_T_1).
A tensor renamed by the quantizer (onnxruntime's last op: ``output_QuantizeLinear_Input``) is matched by node name
(``match = "node"``), the rest by op-type order (``"order"``). Model inputs pair by position and are compared with
the float sample, so the first op is not blamed for the input's own rounding.

The rows describe the QDQ model as written (the ONNX semantics, which `edgekit parity` also uses: OnnxRunner's
default kernels='reference'). onnxruntime's optimizer may compute something else: the model outputs are also run in
the optimized session a deployment uses (OnnxRunner kernels='optimized'), and ``meta["optimized_runtime"]`` /
``meta["notes"]`` say when the two output SQNRs differ by more than 1 dB (known causes: the fused int8 kernels of x86
AVX2 hosts without VNNI saturate int16 sums; onnxruntime 1.32's WeightBiasQuantization pass, which the optimized session
turns off, quantizes the float weights of a Conv kept in float by --keep-float).
"""
from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Hashable, List, Optional, Sequence, Set, Tuple

import numpy as np

from edgekit.calibration.dataset import Sample
from edgekit.errors import InvalidModelError, ToolMissingError, UserError, first_line
from edgekit.parity.layers import SQNR_CAP_DB, Grid, Trace, TracedTensor
from edgekit.parity.layers_result import LayerMeta, LayerRow, TracedModel
from edgekit.provenance import sha256_bytes

log = logging.getLogger(__name__)

QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")
CONSTANT_OPS = ("Constant", "ConstantOfShape")
FLOAT_TYPES = (1, 10, 11, 16)  # onnx.TensorProto FLOAT, FLOAT16, DOUBLE, BFLOAT16
INT_RANGES = {2: ("uint8", 0, 255), 3: ("int8", -128, 127), 4: ("uint16", 0, 65535), 5: ("int16", -32768, 32767)}
CONV_LIKE_RANK = (3, 4, 5)     # N, C, spatial...: channels on axis 1
OPTIMIZER_DIFF_DB = 1.0        # output SQNR as written vs optimized differing by more: say so in the report


@dataclass(frozen=True)
class _Rounding:
    """A QuantizeLinear -> DequantizeLinear pair after a tensor."""

    dequantized: str               # the DequantizeLinear output (what consumers read)
    dtype: str
    scale: Optional[float]         # None when per-axis (a grid per channel: no single grid)
    zero_point: Optional[int]
    grid: Optional[Grid]


class _Graph:
    """An ONNX model read for tracing: producers, consumers, constants, QDQ pairs, inferred types."""

    def __init__(self, path: Path) -> None:
        import onnx
        from onnx import numpy_helper

        self.path = Path(path)
        try:
            self.data = self.path.read_bytes()
            model = onnx.load_from_string(self.data)
        except Exception as exc:  # onnx raises DecodeError and others
            raise InvalidModelError(f"{path} cannot be read as an ONNX model: {str(exc).strip()[:200]}") from exc
        self.model = model
        graph = model.graph
        self.nodes = list(graph.node)
        self.inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
        self.inputs = [i for i in graph.input if i.name not in self.inits]
        self.outputs = list(graph.output)
        self.consumers: Dict[str, list] = {}
        for node in self.nodes:
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)
        self.constants: Set[str] = set(self.inits)
        for node in self.nodes:  # graph order is topological (ONNX requires it)
            if node.op_type in CONSTANT_OPS or (node.input and all(not i or i in self.constants for i in node.input)):
                self.constants.update(node.output)
        try:
            inferred = onnx.shape_inference.infer_shapes(model).graph
            infos = list(inferred.value_info) + list(inferred.input) + list(inferred.output)
        except Exception:  # shape inference is a help, not a requirement
            infos = list(graph.value_info) + list(graph.input) + list(graph.output)
        self.types = {v.name: v.type.tensor_type for v in infos}
        self.producers = {o: n for n in self.nodes for o in n.output}

    def shape(self, name: str) -> Optional[List[int]]:
        t = self.types.get(name)
        if t is None or not t.HasField("shape"):
            return None
        return [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]

    def is_float(self, name: str) -> bool:
        t = self.types.get(name)
        return t is None or t.elem_type == 0 or t.elem_type in FLOAT_TYPES

    def rounding(self, tensor: str) -> Optional[_Rounding]:
        """The QuantizeLinear -> DequantizeLinear following ``tensor``, if any."""
        for q in self.consumers.get(tensor, []):
            if q.op_type != "QuantizeLinear" or q.input[0] != tensor:
                continue
            for dq in self.consumers.get(q.output[0], []):
                if dq.op_type == "DequantizeLinear":
                    return self._describe_qdq(q, dq)
        return None

    def _describe_qdq(self, q, dq) -> _Rounding:
        scale = self.inits.get(q.input[1])
        zp = self.inits.get(q.input[2]) if len(q.input) > 2 and q.input[2] else None
        elem = int(self.types[q.output[0]].elem_type) if q.output[0] in self.types else (3 if zp is not None and zp.dtype == np.int8 else 2)
        dtype, qmin, qmax = INT_RANGES.get(elem, ("uint8", 0, 255))
        if scale is None or scale.size != 1 or (zp is not None and zp.size != 1):
            return _Rounding(dq.output[0], dtype, None, None, None)
        s, z = float(scale.reshape(())), int(zp.reshape(())) if zp is not None else 0
        return _Rounding(dq.output[0], dtype, s, z, (s * (qmin - z), s * (qmax - z), s))

    def int_weights(self, node) -> bool:
        """The node reads a DequantizeLinear of a constant (quantized weights)."""
        feeds = [self.producers.get(i) for i in node.input]
        return any(p is not None and p.op_type == "DequantizeLinear" and p.input[0] in self.constants for p in feeds)

    def compute_nodes(self) -> List[Tuple[int, object]]:
        """(graph index, node) of every op that is a row: not Q/DQ, not constant-only, float first output."""
        return [(k, n) for k, n in enumerate(self.nodes)
                if n.op_type not in QDQ_OPS and n.output and n.output[0] not in self.constants and self.is_float(n.output[0])]

    def consumed(self, tensor: str) -> str:
        """The name of what consumers of ``tensor`` read: its DequantizeLinear output when requantized."""
        r = self.rounding(tensor)
        return r.dequantized if r is not None else tensor


@dataclass(frozen=True)
class _Row:
    index: int
    node: object
    tensor: str                    # the op's output T in the candidate
    reference: Optional[str]       # the reference tensor T is compared with
    match: str                     # name | node | order | unmatched


def _dims(value_info) -> List[int]:
    t = value_info.type.tensor_type
    return [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]


def _check_compatible(ref: _Graph, cand: _Graph) -> None:
    problems = []
    for what, a_list, b_list in (("inputs", ref.inputs, cand.inputs), ("outputs", ref.outputs, cand.outputs)):
        if len(a_list) != len(b_list):
            problems.append(f"{len(a_list)} {what} in {ref.path} but {len(b_list)} in {cand.path}")
        for a, b in zip(a_list, b_list):
            da, db = _dims(a), _dims(b)
            if len(da) != len(db) or any(x != y and x > 0 and y > 0 for x, y in zip(da, db)):
                problems.append(f"{what[:-1]} {a.name!r} has shape {da} but {b.name!r} has {db}")
    if problems:
        raise UserError(
            "per-layer analysis needs two versions of the same network: " + "; ".join(problems),
            fix="pass the float model and the quantized model made from it (model_float.onnx, model_int8.onnx)",
        )


def match_nodes(ref: _Graph, cand: _Graph) -> List[_Row]:
    """One _Row per candidate compute op: by output tensor name, then node name, then op-type order."""
    ref_compute = ref.compute_nodes()
    ref_tensors = {n.output[0] for _, n in ref_compute} | {i.name for i in ref.inputs}
    ref_by_node = {n.name: n for _, n in ref_compute if n.name}
    rows: List[_Row] = []
    for k, node in cand.compute_nodes():
        t = node.output[0]
        if t in ref_tensors and _sizes_agree(ref.shape(t), cand.shape(t)):
            rows.append(_Row(k, node, t, t, "name"))
        elif node.name in ref_by_node and ref_by_node[node.name].op_type == node.op_type \
                and _sizes_agree(ref.shape(ref_by_node[node.name].output[0]), cand.shape(t)):
            rows.append(_Row(k, node, t, ref_by_node[node.name].output[0], "node"))
        else:
            rows.append(_Row(k, node, t, None, "unmatched"))
    if any(r.reference is None for r in rows):
        rows = _align_by_order(ref, cand, ref_compute, rows)
    return rows


def _sizes_agree(a: Optional[List[int]], b: Optional[List[int]]) -> bool:
    """Equal element counts when both shapes are fully known; unknown shapes are checked when the models run."""
    if a is None or b is None or any(d < 0 for d in a + b):
        return True
    return int(np.prod(a)) == int(np.prod(b))


def _align_by_order(ref: _Graph, cand: _Graph, ref_compute, rows: List[_Row]) -> List[_Row]:
    taken = {r.reference for r in rows if r.reference is not None}
    ref_nodes = [n for _, n in ref_compute]
    matcher = difflib.SequenceMatcher(a=[r.node.op_type for r in rows], b=[n.op_type for n in ref_nodes], autojunk=False)
    out = list(rows)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            row, ref_node = rows[block.a + k], ref_nodes[block.b + k]
            target = ref_node.output[0]
            if row.reference is not None or target in taken or not _sizes_agree(ref.shape(target), cand.shape(row.tensor)):
                continue
            out[block.a + k] = _Row(row.index, row.node, row.tensor, target, "order")
            taken.add(target)
    return out


def _channel_axis(shape: Optional[List[int]]) -> int:
    return 1 if shape is not None and len(shape) in CONV_LIKE_RANK else -1


class OnnxTrace(Trace):
    """A float .onnx and its QDQ version on onnxruntime; tensors keyed by candidate tensor name."""

    kind = "onnx"
    runtime = ("onnxruntime CPUExecutionProvider, graph optimizations off (ORT_DISABLE_ALL: QDQ simulated in float, "
               "names kept); each op output compared after its QuantizeLinear -> DequantizeLinear (what the next op reads)")
    tools = ("onnxruntime", "onnx")
    not_applicable: Dict[str, str] = {}

    def __init__(self, ref: _Graph, cand: _Graph) -> None:
        self.ref, self.cand = ref, cand
        self.rows = match_nodes(ref, cand)
        self._sessions = None
        self._optimized = None     # OnnxRunner: the candidate as a deployment runs it (optimizations on)
        self._output_acc: Dict[str, Tuple[object, object]] = {}
        per_axis = [r.tensor for r in self.rows if (q := cand.rounding(r.tensor)) is not None and q.grid is None]
        if per_axis:
            self.not_applicable = {"grid_sqnr_db, clipped_fraction": "per-axis activation scales (no single grid) on "
                                   + ", ".join(per_axis[:5])}

    def describe(self) -> Tuple[TracedModel, TracedModel]:
        return tuple({"source": str(g.path), "sha256": sha256_bytes(g.data), "ops": len(g.nodes)} for g in (self.ref, self.cand))

    def tensors(self) -> Tuple[List[TracedTensor], List[TracedTensor]]:
        inputs = []
        for info in self.cand.inputs:
            q = self.cand.rounding(info.name)
            inputs.append(TracedTensor(key=info.name, op="input", fields={"tensor": info.name, **_describe(q, _dims(info))},
                                       grid=q.grid if q else None, channel_axis=_channel_axis(_dims(info))))
        aliases = self._aliases()
        outputs = []
        for r in self.rows:
            q = self.cand.rounding(r.tensor)
            shape = self.cand.shape(r.tensor)
            fields = {"index": r.index, "op": r.node.op_type, "tensor": r.tensor, **_describe(q, shape), "match": r.match,
                      "reference_tensor": r.reference, "node": r.node.name or None,
                      "compared_tensor": q.dequantized if q else r.tensor}
            inputs_read = tuple(dict.fromkeys(aliases.get(i, i) for i in r.node.input if i and i not in self.cand.constants))
            outputs.append(TracedTensor(key=r.tensor, op=r.node.op_type, fields=fields, grid=q.grid if q else None,
                                        matched=r.reference is not None, inputs=inputs_read,
                                        channel_axis=_channel_axis(shape), int_weights=self.cand.int_weights(r.node)))
        return inputs, outputs

    def _aliases(self) -> Dict[str, str]:
        """DequantizeLinear output -> the tensor it rounds (so an op's inputs name the row that produced them)."""
        out = {}
        for name in [i.name for i in self.cand.inputs] + [r.tensor for r in self.rows]:
            q = self.cand.rounding(name)
            if q is not None:
                out[q.dequantized] = name
        return out

    def matched_counts(self) -> Dict[str, int]:
        return {m: sum(1 for r in self.rows if r.match == m) for m in ("name", "node", "order", "unmatched")}

    def _open(self):
        try:
            import onnxruntime as ort
        except ImportError:
            raise ToolMissingError("onnxruntime", "pip install onnxruntime==1.32.0 (or run `make install`)") from None
        ref_names = [self.ref.consumed(i.name) for i in self.ref.inputs] + \
                    [self.ref.consumed(r.reference) for r in self.rows if r.reference is not None] + \
                    [o.name for o in self.ref.outputs]
        cand_names = [self.cand.consumed(i.name) for i in self.cand.inputs] + \
                     [self.cand.consumed(r.tensor) for r in self.rows if r.reference is not None] + \
                     [o.name for o in self.cand.outputs]
        from edgekit.parity.runners import OnnxRunner

        self._optimized = OnnxRunner(self.cand.path, kernels="optimized")  # the session a deployment runs
        return _session(ort, self.ref, ref_names), _session(ort, self.cand, cand_names)

    def run(self, sample: Sample) -> Dict[Hashable, Tuple[np.ndarray, np.ndarray]]:
        if self._sessions is None:
            self._sessions = self._open()
        (ref_sess, ref_names), (cand_sess, cand_names) = self._sessions
        ref_vals = _run(ref_sess, ref_names, self.ref, sample)
        cand_vals = _run(cand_sess, cand_names, self.cand, sample)
        values: Dict[Hashable, Tuple[np.ndarray, np.ndarray]] = {}
        for info, value in zip(self.cand.inputs, sample):
            values[info.name] = (np.asarray(value, np.float32), cand_vals[self.cand.consumed(info.name)])
        for r in self.rows:
            if r.reference is None:
                continue
            a, b = ref_vals[self.ref.consumed(r.reference)], cand_vals[self.cand.consumed(r.tensor)]
            if a.size != b.size:
                raise UserError(
                    f"per-layer analysis: {r.tensor!r} has {b.size} values in {self.cand.path} but its counterpart "
                    f"{r.reference!r} has {a.size} in {self.ref.path}: they are not two versions of the same network",
                    fix="pass the float model and the quantized model made from it (model_float.onnx, model_int8.onnx)")
            values[r.tensor] = (a, b)
        self._check_optimized(ref_vals, cand_vals, sample)
        return values

    def _check_optimized(self, ref_vals, cand_vals, sample: Sample) -> None:
        """Model outputs of the QDQ model as written (the rows) and as onnxruntime's optimizer runs it, vs the reference."""
        from edgekit.parity.layers import _Accumulator

        optimized = dict(zip(self._optimized.output_names(), self._optimized.run(sample)[0]))
        for a, b in zip(self.ref.outputs, self.cand.outputs):
            written, run = self._output_acc.setdefault(b.name, (_Accumulator(), _Accumulator()))
            written.add(ref_vals[a.name], cand_vals[b.name], None)
            run.add(ref_vals[a.name], optimized[b.name], None)

    def extra_meta(self) -> LayerMeta:
        if not self._output_acc:
            return {}
        checks, notes = {}, []
        for name, (written, run) in self._output_acc.items():
            as_written, as_run = written.metrics(False)["sqnr_db"], run.metrics(False)["sqnr_db"]
            checks[name] = {"sqnr_db_as_written": as_written, "sqnr_db_optimized": as_run}
            if abs(min(as_written, SQNR_CAP_DB) - min(as_run, SQNR_CAP_DB)) > OPTIMIZER_DIFF_DB:
                notes.append(
                    f"output {name!r}: {as_written:.1f} dB SQNR for the QDQ model as written (what the rows and "
                    f"`edgekit parity` measure) but {as_run:.1f} dB in onnxruntime's optimized session (graph "
                    "optimizations on, fused int8 kernels: what a deployment runs): the optimizer changed the computation "
                    "(known cause: on x86 AVX2 hosts without VNNI the fused u8s8 kernels saturate int16 sums)")
        return {"optimized_runtime": {"session": "edgekit.parity.runners.OnnxRunner(kernels='optimized') (onnxruntime, "
                                                 "default graph optimizations, WeightBiasQuantization off)",
                                      "outputs": checks}, "notes": notes}


def _describe(q: Optional[_Rounding], shape: Optional[List[int]]) -> LayerRow:
    if q is None:
        return {"shape": shape, "dtype": "float32", "scale": "float", "zero_point": "float"}
    return {"shape": shape, "dtype": q.dtype, "scale": q.scale if q.scale is not None else "per-axis",
            "zero_point": q.zero_point if q.zero_point is not None else "per-axis"}


def _session(ort, graph: _Graph, names: Sequence[str]):
    """An onnxruntime session of a copy of ``graph`` with ``names`` exposed as outputs, no graph optimization."""
    import onnx

    model = onnx.ModelProto()
    model.CopyFrom(graph.model)
    present = {o.name for o in model.graph.output} | {i.name for i in graph.inputs}
    wanted = list(dict.fromkeys(names))
    for name in wanted:
        if name not in present:
            model.graph.output.append(onnx.ValueInfoProto(name=name))
            present.add(name)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise InvalidModelError(f"onnxruntime cannot load {graph.path} with its intermediate tensors exposed: "
                                f"{first_line(exc)}") from exc
    return session, wanted


def _run(session, names: Sequence[str], graph: _Graph, sample: Sample) -> Dict[str, np.ndarray]:
    types = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64}
    feeds = {i.name: np.asarray(v).astype(types.get(i.type, np.float32)) for i, v in zip(session.get_inputs(), sample)}
    fetch = [n for n in names if n not in feeds]
    values = dict(zip(fetch, session.run(fetch, feeds)))
    values.update({n: feeds[n] for n in names if n in feeds})
    return {k: np.asarray(v, np.float32) for k, v in values.items()}


def trace(reference, candidate) -> OnnxTrace:
    """Load, check and match two .onnx models (paths)."""
    ref, cand = _Graph(Path(reference)), _Graph(Path(candidate))
    _check_compatible(ref, cand)
    return OnnxTrace(ref, cand)
