"""The TFLite backend's report section: activation ranges per tensor and the weight summary."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from edgekit.report import fmt


def _clipped_fraction(stats, lo: float, hi: float) -> float:
    edges = stats.edges
    centers = 0.5 * (edges[:-1] + edges[1:])
    outside = stats.hist[(centers < lo) | (centers > hi)].sum()
    return float(outside) / max(int(stats.hist.sum()), 1)


def tflite_sections(stats: Dict[int, Any], ranges: Dict[int, Tuple[float, float]], result) -> List[str]:
    by_name = {t.name: t for t in result.tensors}
    lines = [
        f"Operators: {', '.join(sorted(set(result.ops)))}",
        "",
        "## Activation ranges chosen per tensor",
        "",
        "Observed range over the calibration set, the range the method chose, the share of "
        "calibration values it clips, and the int8 scale/zero-point in the final model "
        "(SOFTMAX outputs are fixed by TFLite to 1/256, -128; pooling/reshape outputs inherit their input's).",
        "",
        "| tensor | observed min | observed max | chosen lo | chosen hi | clipped | scale | zero point |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for index in sorted(ranges):
        s = stats[index]
        lo, hi = ranges[index]
        q = by_name.get(s.name)
        scale = fmt(q.scales[0]) if q and q.scales else "–"
        zp = str(q.zero_points[0]) if q and q.zero_points else "–"
        lines.append(
            f"| `{s.name}` | {fmt(s.min)} | {fmt(s.max)} | {fmt(lo)} | {fmt(hi)} | "
            f"{_clipped_fraction(s, lo, hi):.4%} | {scale} | {zp} |"
        )
    weights = [t for t in result.tensors if t.constant and t.dtype == "INT8"]
    per_channel = sum(1 for t in weights if len(t.scales) > 1)
    biases = sum(1 for t in result.tensors if t.is_bias)
    lines += [
        "",
        "## Weights",
        "",
        f"{len(weights)} int8 weight tensors ({per_channel} per-channel), {biases} int32 bias tensors.",
        "",
    ]
    return lines
