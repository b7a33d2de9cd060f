"""Where a .tflite runs with LiteRT's GPU delegate: per op accepted or not (and why), partitions, MACs left on the CPU.

Two sources, both recorded per op:
- TF's model analyzer (``tf.lite.experimental.Analyzer.analyze(model_content=..., gpu_compatibility=True)``): its
  per-op "GPU COMPATIBILITY WARNING: <reason>" lines. Measured with tensorflow-cpu 2.21: it printed no warning even
  for UNIQUE, WHERE, SEGMENT_SUM, RANDOM_UNIFORM and a Flex op, so on its own it cannot be trusted to reject.
- The GPU delegate's own rules (tensorflow/lite/delegates/gpu/common/model_builder.cc): an op needs a parser in
  ``NewOperationParser`` (the list below; QUANTIZE/DEQUANTIZE with quantized-model support, on by default), and
  every non-constant input/output tensor must be float32/float16, or int8/uint8 for quantized models.
An op is on the GPU only when both accept it. The delegate hands the largest partition to the GPU by default
(``max_delegated_partitions`` = 1): every other op runs on the CPU. Op-level parameter checks the delegate does at
runtime (e.g. unsupported strides) are not modelled: run `edgekit run --device adb --benchmark-binary ... --delegate gpu`
on the phone to see the delegate's own "Replacing N out of M node(s)" line.
"""
from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from typing import List

from edgekit.mobile.placement import (AnalyzerOp, AnalyzerReport, AnalyzerVerdict, GpuPlacement, ModelFile,
                                     OpPlacement)

# Builtin ops with a parser in the GPU delegate (model_builder.cc, NewOperationParser).
GPU_DELEGATE_OPS = frozenset("""
ABS ADD AVERAGE_POOL_2D BATCH_MATMUL CONCATENATION CONV_2D COS DEPTHWISE_CONV_2D DEQUANTIZE DIV ELU EXP FULLY_CONNECTED
HARD_SWISH LOGISTIC LOG LSTM MAXIMUM MAX_POOL_2D MEAN MINIMUM MIRROR_PAD MUL NEG PACK PAD POW REDUCE_MAX REDUCE_MIN
REDUCE_PROD QUANTIZE RELU RELU6 LEAKY_RELU PRELU RESHAPE RESIZE_BILINEAR RESIZE_NEAREST_NEIGHBOR RSQRT SIN SLICE SOFTMAX
SPACE_TO_DEPTH SPLIT_V SQRT SQUARE SQUARED_DIFFERENCE STRIDED_SLICE SUB SUM TANH TRANSPOSE TRANSPOSE_CONV
""".split())
GPU_TENSOR_TYPES = frozenset({"float32", "float16", "int8", "uint8"})
SOURCE = ("TF model analyzer (gpu_compatibility=True) + LiteRT GPU delegate rules "
          "(tensorflow/lite/delegates/gpu/common/model_builder.cc: NewOperationParser, IsAllAllowedTensors)")

_OP = re.compile(r"^\s*Op#(?P<index>\d+) (?P<name>[A-Za-z0-9_]+)\(")
_SUBGRAPH = re.compile(r"^Subgraph#(?P<index>\d+)")
_WARNING = re.compile(r"^GPU COMPATIBILITY WARNING: (?P<message>.*)$")


def analyzer_text(tflite: bytes) -> str:
    """TF's analyzer report (it prints; captured here)."""
    import tensorflow as tf

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        tf.lite.experimental.Analyzer.analyze(model_content=tflite, gpu_compatibility=True)
    return buffer.getvalue()


def parse_analyzer(text: str) -> AnalyzerReport:
    """The analyzer's op lines (with the warning printed after each), its verdict and summary line."""
    ops: List[AnalyzerOp] = []
    subgraph = 0
    for line in text.splitlines():
        m = _SUBGRAPH.match(line)
        if m:
            subgraph = int(m.group("index"))
            continue
        m = _OP.match(line)
        if m:
            ops.append(AnalyzerOp(subgraph=subgraph, index=int(m.group("index")), name=m.group("name")))
            continue
        m = _WARNING.match(line.strip())
        if m and ops and "has GPU delegate compatibility issues" not in m.group("message"):
            ops[-1] = ops[-1].model_copy(update={"warning": m.group("message").strip()})
    compatible = True if "looks compatible with GPU delegate" in text else (False if "compatibility issues" in text else None)
    summary = next((l.strip() for l in text.splitlines() if "compatible with GPU delegate" in l or "compatibility issues" in l), "")
    return AnalyzerReport(ops=ops, model_compatible=compatible, summary=summary)


@dataclass
class _Row:
    """An op while the partitions are worked out (becomes an OpPlacement)."""

    index: int
    op: str
    output: str
    macs: int
    analyzer: str
    delegate_rule: str
    on_gpu: bool = False

    @property
    def accepted(self) -> bool:
        return self.analyzer == "accepted" and self.delegate_rule == "accepted"


def _rule_verdict(model, op) -> str:
    if op.name.startswith("Flex") or op.name.startswith("CUSTOM"):
        return f"{op.name} is not a builtin the GPU delegate parses (runs on the CPU{' with the Flex delegate' if op.name.startswith('Flex') else ''})"
    if op.name not in GPU_DELEGATE_OPS:
        return f"no GPU delegate parser for {op.name}"
    bad = []
    for index in list(op.inputs) + list(op.outputs):
        if index < 0:
            continue
        t = model.tensor(index)
        constant = index not in model.activation_tensors()
        if not constant and str(t.dtype) not in GPU_TENSOR_TYPES:
            bad.append(f"{t.name} is {t.dtype}")
    if bad:
        return "op is supported, but tensor type isn't: " + ", ".join(bad[:3])
    return "accepted"


def gpu_report(tflite: bytes, *, source: str = "model", model: ModelFile) -> GpuPlacement:
    from edgekit.converters.tflite.mixed import op_macs
    from edgekit.tflite_model import TFLiteModel

    loaded = TFLiteModel(tflite, source=source)
    parsed = parse_analyzer(analyzer_text(tflite))
    warnings = {o.index: o.warning for o in parsed.ops if o.subgraph == 0}
    macs = op_macs(loaded)
    rows = []
    for op in loaded.ops:
        output = loaded.tensor(op.outputs[0]).name if op.outputs and op.outputs[0] >= 0 else "?"
        rows.append(_Row(op.index, op.name, output, macs.get(op.index, 0),
                         warnings.get(op.index) or "accepted", _rule_verdict(loaded, op)))
    partitions = _partitions(rows)
    largest = max(partitions, key=len) if partitions else []
    for i in largest:
        rows[i].on_gpu = True
    total = sum(r.macs for r in rows)
    cpu = sum(r.macs for r in rows if not r.on_gpu)
    return GpuPlacement(
        source=SOURCE,
        analyzer=AnalyzerVerdict(model_compatible=parsed.model_compatible, summary=parsed.summary,
                                 warnings=sum(1 for r in rows if r.analyzer != "accepted")),
        ops=[OpPlacement(index=r.index, op=r.op, output=r.output, macs=r.macs, analyzer=r.analyzer,
                         delegate_rule=r.delegate_rule, on_gpu=r.on_gpu, accepted=r.accepted) for r in rows],
        ops_total=len(rows), ops_accepted=sum(r.accepted for r in rows),
        partitions=len(partitions), partition_sizes=[len(p) for p in partitions],
        ops_on_gpu=len(largest),
        macs_total=total, macs_on_cpu=cpu, macs_on_cpu_share=(cpu / total) if total else 0.0,
        note="the GPU delegate delegates the largest partition only (max_delegated_partitions = 1, its default); "
             "MACs counted for CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV, BATCH_MATMUL",
        model=model,
    )


def _partitions(rows: List[_Row]) -> List[List[int]]:
    """Runs of accepted ops in execution order (the delegate partitions a sequential graph this way)."""
    runs: List[List[int]] = []
    current: List[int] = []
    for i, row in enumerate(rows):
        if row.accepted:
            current.append(i)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


def markdown(report: GpuPlacement, model_name: str) -> str:
    r = report
    lines = [f"# GPU delegate placement: {model_name}", "",
             f"Source: {r.source}.", "",
             f"- ops accepted: {r.ops_accepted} of {r.ops_total}; partitions of accepted ops: "
             f"{r.partitions} (sizes {r.partition_sizes}); on the GPU: {r.ops_on_gpu} ops",
             f"- MACs on the CPU: {r.macs_on_cpu:,} of {r.macs_total:,} ({100 * r.macs_on_cpu_share:.1f} %)",
             f"- TF analyzer: {r.analyzer.summary or 'no summary line'} ({r.analyzer.warnings} op warning(s))",
             f"- {r.note}", "",
             "| # | op | output | MACs | analyzer | delegate rules | runs on |", "|---|---|---|---|---|---|---|"]
    for o in r.ops:
        lines.append(f"| {o.index} | {o.op} | `{o.output[:60]}` | {o.macs:,} | {o.analyzer} | "
                     f"{o.delegate_rule} | {'GPU' if o.on_gpu else 'CPU'} |")
    return "\n".join(lines) + "\n"


def compile_for_gpu(model_path, outdir) -> GpuPlacement:
    """Write gpu.json, report.md and manifest.json to ``outdir`` (atomically) and return the report."""
    from pathlib import Path

    from edgekit.artifact import Artifact, Manifest
    from edgekit.atomic import atomic_output_dir
    from edgekit.errors import InvalidModelError
    from edgekit.provenance import sha256_file

    model_path = Path(model_path)
    if model_path.suffix.lower() != ".tflite" or not model_path.is_file():
        raise InvalidModelError(f"--target gpu reads a .tflite file; {model_path} is not one",
                                fix="pass the .tflite from edgekit quantize (model_int8.tflite)")
    report = gpu_report(model_path.read_bytes(), source=str(model_path),
                        model=ModelFile(path=str(model_path), sha256=sha256_file(model_path)))
    with atomic_output_dir(Path(outdir)) as stage:
        (stage / "gpu.json").write_text(report.dumps())
        (stage / "report.md").write_text(markdown(report, model_path.name))
        manifest = Manifest(command="compile")
        source = manifest.add(Artifact.from_file(model_path, format="tflite", stage="source"))
        manifest.add(Artifact.from_file(stage / "gpu.json", format="gpu-placement", stage="compile", parent=source,
                                        params={"target": "gpu"}))
        manifest.write(stage / "manifest.json")
    return report
