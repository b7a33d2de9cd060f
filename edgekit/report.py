"""Human (Markdown) and machine (JSON) reports."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.provenance import host_info, tool_versions, utc_now
from edgekit.scale.report import execution_lines


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


def kernel_lines(reference: dict, candidate: dict) -> list[str]:
    """Which kernels computed each side (LiteRT models), and the 1-LSB caveat of the optimized ones."""
    ran = [f"{side} on {d['kernels']}" for side, d in (("reference", reference), ("candidate", candidate)) if d and d.get("kernels")]
    notes = sorted({d["kernels_note"] for d in (reference, candidate) if d and d.get("kernels_note")})
    return ([f"Kernels: {'; '.join(ran)}."] if ran else []) + [f"Note: {n}." for n in notes]


def parity_section(parity) -> list[str]:
    lines = [f"**Verdict: {'PASSED' if parity.passed else 'FAILED'}** on {parity.samples} samples", ""]
    thresholds = {k: v for k, v in parity.tolerance.to_json().items() if v is not None}
    lines.append(f"Thresholds: {', '.join(f'{k} {v}' for k, v in thresholds.items()) or 'none'}")
    lines += kernel_lines(parity.reference.to_dict(), parity.candidate.to_dict())
    for failure in parity.failures:
        lines.append(f"- FAILED {failure}")
    lines.append("")
    keys = ["top1_agreement", "topk_agreement", "mask_iou", "cosine", "sqnr_db", "rmse", "mae", "rel_l2", "max_abs",
            "bit_exact_fraction"]
    rows = [(o, o.metrics()) for o in parity.outputs]
    present = [k for k in keys if any(k in values for _, values in rows)]
    lines.append("| output | kind | " + " | ".join(present) + " |")
    lines.append("|---|---|" + "---|" * len(present))
    for o, values in rows:
        lines.append(f"| {o.name} | {o.kind or '–'} | " + " | ".join(fmt(values.get(k, '–')) for k in present) + " |")
    reasons = [f"- {o.name}: {o.kind} ({o.kind_reason})" for o, _ in rows if o.kind]
    if reasons:
        lines += ["", "How each output is judged (kind: why; change it with `--output-kind NAME=KIND`):", *reasons]
    if parity.accuracy:
        a = parity.accuracy
        lines += [
            "",
            f"Accuracy on {a.labels} labelled held-out samples: reference {a.reference_top1:.2%}, "
            f"candidate {a.candidate_top1:.2%} (drop {a.drop * 100:+.2f} points).",
        ]
    return lines


def write_quantize_report(
    path: Path, *, model: str, reference, quantized, options, calib, parity, int8_sha: str, layer_files=(),
) -> None:
    """report.md of `edgekit quantize`: provenance, parity, then the backend's own sections."""
    main = Path(path).parent / quantized.main_file
    size = main.stat().st_size if main.is_file() else sum(f.stat().st_size for f in main.rglob("*") if f.is_file())
    lines = [
        f"# edgekit quantize: {Path(model).name}",
        "",
        f"- Source: `{model}` ({reference.kind}), "
        + (f"exported by {reference.route}" if reference.route != "as given" else "used as the float reference as given"),
        f"- Float reference `{reference.main_file}` sha256 `{reference.sha256}`",
        f"- Quantized model `{quantized.main_file}` ({quantized.format}) sha256 `{int8_sha}` ({size:,} bytes)",
        f"- Calibration: method **{options.method}**"
        + (f" (percentile {options.range_options.percentile})" if options.method == "percentile" else "")
        + f", {len(calib)} samples from `{calib.source.path}`, seed {calib.seed}, fingerprint `{calib.fingerprint[:16]}`",
        f"- Produced {utc_now()} on {host_info()['hostname']} ({host_info()['platform']})",
        f"- Tools: {', '.join(f'{k} {v}' for k, v in tool_versions().items())}",
        *[f"- Note: {n}" for n in reference.notes],
        "",
        f"## Parity: float reference vs quantized ({quantized.runner.describe().get('runtime', '?')}, held-out data)",
        "",
        *parity_section(parity),
        *execution_lines(parity.data),
        "",
        *quantized.report_lines,
    ]
    if layer_files:
        lines += ["", "## Per-layer analysis", "", "Written with --debug: " + ", ".join(f"`{n}`" for n in layer_files), ""]
    Path(path).write_text("\n".join(lines) + "\n")
