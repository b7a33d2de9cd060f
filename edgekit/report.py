"""Human (Markdown) and machine (JSON) reports."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, Tuple

import numpy as np

from edgekit.provenance import host_info, tool_versions, utc_now


def json_safe(value: Any) -> Any:
    """JSON without NaN/Infinity literals: non-finite floats become the strings 'inf'/'-inf'/'nan'."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def fmt(value: Any, digits: int = 4) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            return "∞" if value > 0 else ("-∞" if value < 0 else "nan")
        return f"{value:.{digits}g}"
    return str(value)


def parity_section(parity) -> list[str]:
    lines = [f"**Verdict: {'PASSED' if parity.passed else 'FAILED'}** on {parity.samples} samples", ""]
    thresholds = {k: v for k, v in parity.tolerance.to_json().items() if v is not None}
    lines.append(f"Thresholds: {', '.join(f'{k} {v}' for k, v in thresholds.items()) or 'none'}")
    for failure in parity.failures:
        lines.append(f"- FAILED {failure}")
    lines.append("")
    keys = ["top1_agreement", "cosine", "sqnr_db", "rmse", "mae", "rel_l2", "max_abs", "bit_exact_fraction"]
    present = [k for k in keys if any(k in o for o in parity.outputs)]
    lines.append("| output | " + " | ".join(present) + " |")
    lines.append("|---|" + "---|" * len(present))
    for o in parity.outputs:
        lines.append(f"| {o['name']} | " + " | ".join(fmt(o.get(k, '–')) for k in present) + " |")
    if parity.accuracy:
        a = parity.accuracy
        lines += [
            "",
            f"Accuracy on {a['labels']} labelled held-out samples: reference {a['reference_top1']:.2%}, "
            f"candidate {a['candidate_top1']:.2%} (drop {a['drop'] * 100:+.2f} points).",
        ]
    return lines


def _clipped_fraction(stats, lo: float, hi: float) -> float:
    edges = stats.edges
    centers = 0.5 * (edges[:-1] + edges[1:])
    outside = stats.hist[(centers < lo) | (centers > hi)].sum()
    return float(outside) / max(int(stats.hist.sum()), 1)


def write_quantize_report(
    path: Path, *, model: str, exported, options, calib, stats: Dict[int, Any], ranges: Dict[int, Tuple[float, float]],
    result, parity, int8_sha: str, float_sha: str,
) -> None:
    by_name = {t.name: t for t in result.tensors}
    lines = [
        f"# edgekit quantize: {Path(model).name}",
        "",
        f"- Source: `{model}` ({exported.kind.value}), " + (f"exported by {exported.route}" if exported.route != "as given" else "used as the float reference as given"),
        f"- Float reference sha256 `{float_sha}`",
        f"- INT8 model `model_int8.tflite` sha256 `{int8_sha}` ({len(result.tflite):,} bytes)",
        f"- Calibration: method **{options.method}**"
        + (f" (percentile {options.range_options.percentile})" if options.method == "percentile" else "")
        + f", {len(calib)} samples from `{calib.source.path}`, seed {calib.seed}, fingerprint `{calib.fingerprint[:16]}`",
        f"- Operators: {', '.join(sorted(set(result.ops)))} — all int8 (TFLITE_BUILTINS_INT8)",
        f"- Produced {utc_now()} on {host_info()['hostname']} ({host_info()['platform']})",
        f"- Tools: {', '.join(f'{k} {v}' for k, v in tool_versions().items())}",
        "",
        "## Parity: float reference vs INT8 (LiteRT BUILTIN_REF kernels, held-out data)",
        "",
        *parity_section(parity),
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
    Path(path).write_text("\n".join(lines) + "\n")
