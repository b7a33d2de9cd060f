"""Read a QDQ ONNX model back: which nodes run in int8, activation scales, weight sizes."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")
BIASED = {"Conv", "ConvTranspose", "Gemm"}  # input 2 is a bias (int32 in onnxruntime's QDQ, float in NNCF's)


@dataclass
class ActivationScale:
    tensor: str
    scale: float
    zero_point: int
    dtype: str

    @property
    def range(self) -> Tuple[float, float]:
        lo, hi = (-128, 127) if self.dtype == "int8" else (0, 255)
        return (lo - self.zero_point) * self.scale, (hi - self.zero_point) * self.scale


@dataclass
class QdqSummary:
    op_counts: Dict[str, int]
    quantize_nodes: int
    dequantize_nodes: int
    quantized_nodes: Dict[str, int]              # op type -> nodes whose inputs all come from DequantizeLinear
    float_nodes: Dict[str, List[str]]            # op type -> node names left with a float input
    activations: List[ActivationScale]
    weights: List[dict] = field(default_factory=list)  # name, dtype, shape, bytes, channels (per-channel scales)
    float_weight_bytes: int = 0
    float_bias_nodes: List[str] = field(default_factory=list)  # int8 inputs, bias kept float (NNCF does this)

    def to_json(self) -> dict:
        return {
            "op_counts": self.op_counts, "quantize_linear": self.quantize_nodes, "dequantize_linear": self.dequantize_nodes,
            "quantized_nodes": self.quantized_nodes, "float_nodes": self.float_nodes,
            "activation_scales": {a.tensor: {"scale": a.scale, "zero_point": a.zero_point, "dtype": a.dtype} for a in self.activations},
            "weights": self.weights, "int8_weight_bytes": sum(w["bytes"] for w in self.weights),
            "float_weight_bytes": self.float_weight_bytes, "float_bias_nodes": self.float_bias_nodes,
        }


def summarize(path: Path) -> QdqSummary:
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    graph = model.graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    counts = Counter(n.op_type for n in graph.node)

    activations, weights, int8_consts = [], [], set()
    for node in graph.node:
        if node.op_type == "QuantizeLinear":
            scale = inits.get(node.input[1])
            zp = inits.get(node.input[2]) if len(node.input) > 2 else None
            if scale is not None and scale.size == 1:
                activations.append(ActivationScale(
                    node.input[0], float(scale.reshape(())), int(zp.reshape(())) if zp is not None else 0,
                    str(zp.dtype) if zp is not None else "uint8"))
        elif node.op_type == "DequantizeLinear" and node.input[0] in inits:
            value = inits[node.input[0]]
            int8_consts.add(node.input[0])
            scale = inits.get(node.input[1])
            weights.append({"name": node.input[0], "dtype": str(value.dtype), "shape": list(value.shape),
                            "bytes": int(value.nbytes), "channels": int(scale.size) if scale is not None else 1})

    quantized, left_float, float_bias = Counter(), {}, []
    for node in graph.node:
        if node.op_type in QDQ_OPS:
            continue
        name = node.name or node.output[0]
        bias = node.input[2] if node.op_type in BIASED and len(node.input) > 2 else None
        data_inputs = [i for i in node.input if i and i != bias and (i not in inits or i in int8_consts)]
        feeds = [producers.get(i) for i in data_inputs]
        float_params = [i for i in node.input if i != bias and i in inits and inits[i].dtype == np.float32 and inits[i].size > 1]
        if data_inputs and all(p is not None and p.op_type == "DequantizeLinear" for p in feeds) and not float_params:
            quantized[node.op_type] += 1
            if bias and bias in inits and inits[bias].dtype == np.float32:
                float_bias.append(name)
        else:
            left_float.setdefault(node.op_type, []).append(name)
    float_bytes = sum(int(v.nbytes) for v in inits.values() if v.dtype == np.float32 and v.size > 1)
    return QdqSummary(dict(sorted(counts.items())), counts["QuantizeLinear"], counts["DequantizeLinear"],
                      dict(sorted(quantized.items())), left_float, activations, weights, float_bytes, float_bias)


def scale_spread(a: QdqSummary, b: QdqSummary) -> Dict[str, float]:
    """How much the activation scales of two quantizations of the same graph differ (ratio b / a)."""
    first = {x.tensor: x.scale for x in a.activations}
    ratios = [y.scale / first[y.tensor] for y in b.activations if y.tensor in first and first[y.tensor] > 0]
    if not ratios:
        return {"tensors": 0}
    r = np.asarray(ratios)
    return {"tensors": int(r.size), "differing": int(np.sum(np.abs(r - 1) > 1e-6)), "min_ratio": float(r.min()),
            "median_ratio": float(np.median(r)), "max_ratio": float(r.max())}
