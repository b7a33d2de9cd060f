"""The "## ONNX QDQ" section of report.md."""
from __future__ import annotations

from typing import Dict, List, Sequence

from .inspect_qdq import QdqSummary

SCALE_ROWS = 40


def onnx_sections(summary: QdqSummary, engine: Dict[str, object], float_reasons: Dict[str, str],
                  kept: Sequence[str] = (), fallback: Sequence[str] = ()) -> List[str]:
    """``kept``: nodes --keep-float named; ``fallback``: nodes --fallback auto left in float (with ``kept``)."""
    lines = ["## ONNX QDQ", ""]
    lines.append(f"- engine: {engine['engine']} {engine['version']}")
    lines.append(f"- calibration method: {engine['method']} -> {engine['engine_method']}")
    for key, value in engine["settings"].items():
        lines.append(f"  - {key}: {value}")
    if engine.get("notes"):
        lines += [f"- {note}" for note in engine["notes"]]
    lines.append(f"- QuantizeLinear: {summary.quantize_nodes}, DequantizeLinear: {summary.dequantize_nodes} "
                 f"({len(summary.weights)} of them on constant weights/biases, the rest on activations)")
    lines.append("- op counts: " + ", ".join(f"{k} {v}" for k, v in summary.op_counts.items()))
    lines.append("- int8 (all inputs dequantized from int8): "
                 + (", ".join(f"{k} x{v}" for k, v in summary.quantized_nodes.items()) or "none"))
    if summary.float_bias_nodes:
        lines.append(f"- bias kept float on: {', '.join(summary.float_bias_nodes)} (the engine quantizes weights and inputs only)")
    if summary.float_nodes:
        lines.append("- left float:")
        for op, names in summary.float_nodes.items():
            shown = ", ".join(names[:6]) + (f" (+{len(names) - 6})" if len(names) > 6 else "")
            reason = float_reasons.get(op, "an input does not come from a DequantizeLinear")
            if kept and all(n in kept for n in names):
                reason = "--keep-float (by name)"
            elif fallback and all(n in fallback for n in names):
                reason = "--fallback auto" + (" / --keep-float" if any(n in kept for n in names) else "")
            lines.append(f"  - {op} x{len(names)} ({shown}): {reason}")
    if summary.float_nodes:
        lines.append("- deploying ops kept in float with onnxruntime: create the session with "
                     "`disabled_optimizers=[\"WeightBiasQuantization\"]` (edgekit's runner does); otherwise onnxruntime "
                     "re-quantizes their float weights at load time and undoes the mixed precision")
    int8_bytes = sum(w["bytes"] for w in summary.weights if w["dtype"] == "int8")
    int32_bytes = sum(w["bytes"] for w in summary.weights if w["dtype"] == "int32")
    lines.append(f"- weights: {int8_bytes} B int8 ({sum(1 for w in summary.weights if w['dtype'] == 'int8')} tensors, "
                 f"per-channel scales), {int32_bytes} B int32 biases, {summary.float_weight_bytes} B float constants left")
    lines += ["", f"Activation scales ({len(summary.activations)} quantized tensors"
              + (f", first {SCALE_ROWS} shown" if len(summary.activations) > SCALE_ROWS else "") + "):", "",
              "| tensor | scale | zero point | type | range |", "|---|---|---|---|---|"]
    for a in summary.activations[:SCALE_ROWS]:
        lo, hi = a.range
        lines.append(f"| {a.tensor} | {a.scale:.6g} | {a.zero_point} | {a.dtype} | [{lo:.4g}, {hi:.4g}] |")
    lines.append("")
    return lines
