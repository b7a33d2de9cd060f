"""The one reader of .tflite flatbuffers: tensors (type, shape, quantization, constant or not), operators and
graph inputs/outputs of the first subgraph, read straight from the flatbuffer with the schema bindings.

The graph is read without a LiteRT interpreter, so a model whose operators LiteRT itself lacks still gets a full
listing. Every vector length is checked against the file size before it is walked, so a corrupt or truncated file
gives an ``InvalidModelError`` instead of a hang or a Python traceback. Running models is edgekit.tflite_model's job.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np

from edgekit.errors import InvalidModelError
from edgekit.tflite_model import check_tflite_bytes

_TYPE_NAMES = {0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 5: "STRING", 6: "BOOL", 7: "INT16",
               8: "COMPLEX64", 9: "INT8", 10: "FLOAT64", 11: "COMPLEX128", 12: "UINT64", 13: "RESOURCE",
               14: "VARIANT", 15: "UINT32", 16: "UINT16", 17: "INT4"}
_TYPE_BYTES = {"FLOAT32": 4, "FLOAT16": 2, "INT32": 4, "UINT8": 1, "INT64": 8, "BOOL": 1, "INT16": 2, "INT8": 1,
               "FLOAT64": 8, "UINT64": 8, "UINT32": 4, "UINT16": 2}


@dataclass(frozen=True)
class Tensor:
    index: int
    name: str
    type: str                  # schema name: INT8, FLOAT32, ...
    shape: Tuple[int, ...]
    constant: bool
    scales: Tuple[float, ...] = ()
    zero_points: Tuple[int, ...] = ()

    @property
    def elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def bytes(self) -> int:
        return self.elements * _TYPE_BYTES.get(self.type, 0)


@dataclass(frozen=True)
class Op:
    index: int
    name: str                  # builtin name (CONV_2D) or CUSTOM
    custom_code: str
    version: int
    inputs: Tuple[int, ...]
    outputs: Tuple[int, ...]

    @property
    def label(self) -> str:
        return f"CUSTOM '{self.custom_code}'" if self.name == "CUSTOM" else self.name

    @property
    def qualified_name(self) -> str:
        """CONV_2D, or CUSTOM(code) for a custom op (Flex ops: CUSTOM(FlexName))."""
        return f"CUSTOM({self.custom_code})" if self.name == "CUSTOM" and self.custom_code else self.name


@dataclass
class Graph:
    """The parts of a .tflite the firmware tools need (first subgraph)."""

    tensors: List[Tensor]
    ops: List[Op]
    inputs: List[int]
    outputs: List[int]
    subgraphs: int
    source: str = "<bytes>"
    size: int = 0

    def location(self, op: Op) -> str:
        """'op #3 -> tensor 'conv1/Relu'' (the first of TFLite's ';'-joined fused names)."""
        names = [self.tensors[o].name.split(";")[0] for o in op.outputs if 0 <= o < len(self.tensors)]
        return f"op #{op.index} -> tensor '{names[0] if names else '?'}'"

    @property
    def op_names(self) -> List[str]:
        """Distinct builtin names in first-use order."""
        return list(dict.fromkeys(op.name for op in self.ops))

    def macs(self) -> Dict[int, int]:
        """Multiply-accumulates per op (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED; others 0)."""
        result = {}
        for op in self.ops:
            result[op.index] = _op_macs(self, op)
        return result


def _op_macs(graph: Graph, op: Op) -> int:
    try:
        out = graph.tensors[op.outputs[0]]
        weights = graph.tensors[op.inputs[1]]
    except IndexError:
        return 0
    if op.name == "CONV_2D" and len(weights.shape) == 4:
        _, kh, kw, cin = weights.shape
        return out.elements * kh * kw * cin
    if op.name == "DEPTHWISE_CONV_2D" and len(weights.shape) == 4:
        _, kh, kw, _ = weights.shape
        return out.elements * kh * kw
    if op.name == "FULLY_CONNECTED" and len(weights.shape) == 2:
        return out.elements * weights.shape[1]
    return 0


def _checked_length(n: int, data: bytes, what: str, source: str) -> int:
    if n < 0 or n * 4 > len(data):
        raise InvalidModelError(f"{source}: {what} count {n} is impossible for a {len(data)}-byte file (corrupt model)",
                                fix="re-export the model; the file is damaged or truncated")
    return n


def read_graph(data: bytes, source: str = "<bytes>") -> Graph:
    """Parse the flatbuffer; any structural problem becomes one ``InvalidModelError``."""
    check_tflite_bytes(data, source)
    from ai_edge_litert import schema_py_generated as schema

    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    try:
        model = schema.Model.GetRootAs(data, 0)
        subgraphs = _checked_length(model.SubgraphsLength(), data, "subgraph", source)
        if subgraphs < 1:
            raise InvalidModelError(f"{source} has no subgraph", fix="re-export the model")
        codes = []
        for i in range(_checked_length(model.OperatorCodesLength(), data, "operator code", source)):
            code = model.OperatorCodes(i)
            builtin = max(int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode()))
            custom = code.CustomCode()
            codes.append((names.get(builtin, f"BUILTIN_{builtin}"), custom.decode(errors="replace") if custom else "",
                          int(code.Version())))
        buffers = _checked_length(model.BuffersLength(), data, "buffer", source)
        sub = model.Subgraphs(0)
        tensors = []
        for i in range(_checked_length(sub.TensorsLength(), data, "tensor", source)):
            t = sub.Tensors(i)
            shape = tuple(int(v) for v in (t.ShapeAsNumpy() if t.ShapeLength() else ()))
            buffer = int(t.Buffer())
            constant = False
            if 0 < buffer < buffers:
                b = model.Buffers(buffer)
                length = b.DataLength()
                if length and b._tab.Vector(b._tab.Offset(4)) + length > len(data):
                    raise InvalidModelError(f"{source}: the data of tensor {i} runs past the end of the file (truncated model)",
                                            fix="re-export or re-download the model file")
                constant = length > 0 or int(b.Size()) > 0
            q = t.Quantization()
            scales: Tuple[float, ...] = ()
            zps: Tuple[int, ...] = ()
            if q is not None:
                scales = tuple(float(v) for v in q.ScaleAsNumpy()) if q.ScaleLength() else ()
                zps = tuple(int(v) for v in q.ZeroPointAsNumpy()) if q.ZeroPointLength() else ()
            name = t.Name()
            tensors.append(Tensor(i, name.decode(errors="replace") if name else f"tensor{i}",
                                  _TYPE_NAMES.get(int(t.Type()), f"TYPE_{int(t.Type())}"), shape, constant, scales, zps))
        ops = []
        for i in range(_checked_length(sub.OperatorsLength(), data, "operator", source)):
            o = sub.Operators(i)
            index = int(o.OpcodeIndex())
            if not 0 <= index < len(codes):
                raise InvalidModelError(f"{source}: op #{i} names operator code {index} of {len(codes)} (corrupt model)",
                                        fix="re-export the model; the file is damaged")
            name, custom, version = codes[index]
            ins = tuple(int(v) for v in o.InputsAsNumpy()) if o.InputsLength() else ()
            outs = tuple(int(v) for v in o.OutputsAsNumpy()) if o.OutputsLength() else ()
            for t in ins + outs:
                if t >= len(tensors) or t < -1:
                    raise InvalidModelError(f"{source}: op #{i} uses tensor {t} of {len(tensors)} (corrupt model)",
                                            fix="re-export the model; the file is damaged")
            ops.append(Op(i, name, custom, version, ins, outs))
        graph_in = [int(v) for v in sub.InputsAsNumpy()] if sub.InputsLength() else []
        graph_out = [int(v) for v in sub.OutputsAsNumpy()] if sub.OutputsLength() else []
        for t in graph_in + graph_out:
            if not 0 <= t < len(tensors):
                raise InvalidModelError(f"{source}: graph input/output tensor {t} of {len(tensors)} (corrupt model)",
                                        fix="re-export the model; the file is damaged")
    except InvalidModelError:
        raise
    except Exception as exc:  # flatbuffers raises IndexError/struct.error/ValueError/... on damaged data
        raise InvalidModelError(
            f"{source} is not a readable TFLite flatbuffer ({type(exc).__name__}: {exc}); it may be truncated or corrupt",
            fix="re-export or re-download the model file",
        ) from exc
    return Graph(tensors, ops, graph_in, graph_out, subgraphs, source, len(data))


