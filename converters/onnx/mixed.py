"""--fallback auto for ONNX (onnxruntime engine): the search of edgekit/fallback.py with ONNX callbacks.

Calibration happens once (the onnxruntime range cache); each step re-quantizes with a growing nodes_to_exclude, is
compared with the float reference in the QDQ reference semantics (OnnxRunner: graph optimizations off, independent of
the host's int8 instructions), ranked by the ONNX per-layer analysis, and timed on this host with onnxruntime's
optimized session (fused int8 kernels: what a deployment runs).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Dict, List, Tuple

from edgekit.calibration.dataset import Sample
from edgekit.fallback import Built, Candidate, FallbackResult, FallbackSearch, RankedOp
from edgekit.parity.runners import OnnxRunner
from edgekit.provenance import tool_version
from edgekit.quantize_backend import FloatReference, QuantizeInputs

from . import ort_quant

LATENCY_RUNS = 30          # timed session.run calls per model (after 3 warm-up runs)
LATENCY_LABEL = ("measured on this host: onnxruntime {version} CPUExecutionProvider, 1 thread, default graph "
                 "optimizations (fused int8 kernels; WeightBiasQuantization off), median of {n} runs")
RUNTIME_NOTE = ("on other onnxruntime execution providers and on NPUs, nodes left in float may run on a different "
                "device or not at all")


def ort_fallback(float_path: Path, cache: Path, settings: ort_quant.OrtSettings, reference: FloatReference,
                 inputs: QuantizeInputs, options) -> FallbackResult:
    """--fallback auto with onnxruntime: re-quantize with the one calibration cache and a growing nodes_to_exclude.

    The plan is the tuple of node names left in float (--keep-float's first); ops are ranked by the per-layer
    analysis of each kept candidate (edgekit.parity.layers_onnx), restricted to nodes onnxruntime quantizes."""
    import onnx

    from edgekit.parity.layers import SQNR_CAP_DB, per_layer_report

    graph = onnx.load(str(float_path)).graph
    macs = node_macs(float_path)
    op_types = set(ort_quant.quantized_op_types())
    quantizable = {n.name: n.op_type for n in graph.node if n.name and n.op_type in op_types}
    variants = inputs.workdir / "fallback"
    variants.mkdir(exist_ok=True)

    def build(plan: Tuple[str, ...], activations: str) -> Built:
        path = variants / f"step_{len(search.steps)}.onnx"
        ort_quant.quantize(float_path, path, cache, replace(settings, nodes_to_exclude=list(plan)))
        runner = OnnxRunner(path)  # parity: QDQ reference semantics
        latency = session_latency_ms(OnnxRunner(path, kernels="optimized"), inputs.eval_samples[0])
        return Built(path, runner, path.stat().st_size, list(plan), sum(macs.get(n, 0) for n in plan), latency)

    def rank(candidate: Candidate) -> List[RankedOp]:
        report = per_layer_report(float_path, candidate.result, inputs.eval_samples, progress=inputs.progress, max_samples=64)
        picks = {}
        for row in report.ranked():
            node = row.get("node")
            adds_noise = (row.get("local_sqnr_db") or 0.0) < SQNR_CAP_DB  # at the cap: the node adds no noise
            if node in quantizable and row.get("match") != "unmatched" and adds_noise and node not in picks:
                picks[node] = RankedOp(node, f"{quantizable[node]} '{node}'", row.get("local_sqnr_db"))
        return list(picks.values())

    search = FallbackSearch(reference=reference.runner, build=build, samples=inputs.eval_samples,
                            labels=inputs.eval_labels, tolerance=options.tolerance, progress=inputs.progress)
    start = tuple(settings.nodes_to_exclude)
    best = search.evaluate("all int8" if not start else "int8 + --keep-float", start)
    stopped = "the first model met the target"
    if not best.parity.passed:
        # no output-grid stop (TFLite has one): a node excluded here also leaves its output float, so keeping the
        # last node in float lifts the output above its 8-bit grid (measured: 53.7 dB on a 47.3 dB grid)
        best, stopped = search.greedy(best, rank=rank, with_float=lambda plan, node: tuple(sorted({*plan, node})))
    return search.result(best, stopped, fallback_to="float", total_macs=sum(macs.values()),
                         latency_method=LATENCY_LABEL.format(version=tool_version("onnxruntime"), n=LATENCY_RUNS),
                         runtime_note=RUNTIME_NOTE)


def session_latency_ms(runner: OnnxRunner, sample: Sample, runs: int = LATENCY_RUNS) -> float:
    """Median session.run time on this host (the runner's session: CPU, 1 thread; pass kernels='optimized')."""
    feeds = {spec.name: value.astype(spec.dtype) for spec, value in zip(runner.input_specs(), sample)}
    for _ in range(3):
        runner.session.run(None, feeds)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        runner.session.run(None, feeds)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def node_macs(float_path: Path) -> Dict[str, int]:
    """Multiply-accumulates per node name (Conv, ConvTranspose, Gemm, MatMul with a constant weight), from the
    shapes onnx's shape inference gives; nodes whose shapes are unknown count 0."""
    import numpy as np
    import onnx

    model = onnx.shape_inference.infer_shapes(onnx.load(str(float_path)))
    graph = model.graph
    weights = {i.name: list(i.dims) for i in graph.initializer}
    shapes = {v.name: [d.dim_value if d.HasField("dim_value") else 0 for d in v.type.tensor_type.shape.dim]
              for v in [*graph.value_info, *graph.input, *graph.output]}
    macs: Dict[str, int] = {}
    for node in graph.node:
        if len(node.input) < 2 or node.input[1] not in weights or not shapes.get(node.output[0]):
            continue
        w, out = weights[node.input[1]], shapes[node.output[0]]
        n_out = int(np.prod([max(d, 1) for d in out]))
        if node.op_type == "Conv" and len(w) >= 3:           # (M, C/group, kH, kW)
            macs[node.name] = n_out * int(np.prod(w[1:]))
        elif node.op_type == "ConvTranspose" and len(w) >= 3 and shapes.get(node.input[0]):  # (C, M/group, kH, kW)
            macs[node.name] = int(np.prod([max(d, 1) for d in shapes[node.input[0]]])) * int(np.prod(w[1:]))
        elif node.op_type == "Gemm" and len(w) == 2:
            trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
            macs[node.name] = n_out * int(w[1] if trans_b else w[0])
        elif node.op_type == "MatMul" and len(w) >= 2:
            macs[node.name] = n_out * int(w[-2])
    return macs
