"""The parity sections (parity.json, ``ParityReport``): per-output agreement against the thresholds, the SQNR of
every output, accuracy, and the worst samples where the run kept them (the Ray path)."""
from __future__ import annotations

import math
from typing import List, Optional

from edgekit.parity.result import ParityReport
from edgekit.report_html.page import Page, bullets, figure, p, table
from edgekit.report_html.svg import Bar, column_chart, esc, hbar_chart

METRICS = ("top1_agreement", "topk_agreement", "mask_iou", "cosine", "sqnr_db", "rmse", "mae", "rel_l2", "max_abs",
           "bit_exact_fraction")
AGREEMENT = (("top1_agreement", "min_top1"), ("topk_agreement", "min_topk"), ("mask_iou", "min_iou"),
             ("cosine", "min_cosine"), ("bit_exact_fraction", None))
SQNR_CAP_DB = 100.0   # an infinite SQNR (identical outputs) is drawn at this length


def _finite(value: float, cap: float) -> float:
    return cap if math.isinf(value) and value > 0 else (0.0 if not math.isfinite(value) else value)


def agreement_chart(report: ParityReport) -> Optional[str]:
    """Agreement metrics in [0, 1] per output (``chart-parity-agreement``), each threshold a red tick."""
    bars = []
    single = len(report.outputs) == 1
    for o in report.outputs:
        values = o.metrics()
        for metric, threshold in AGREEMENT:
            if metric in values:
                limit = getattr(report.tolerance, threshold) if threshold else None
                bars.append(Bar(metric if single else f"{o.name[:12]}.. {metric}", max(0.0, _finite(values[metric], 1.0)), group=metric,
                                mark=limit, tip=f"{o.name} {metric} {values[metric]:.6g}"
                                                + (f" (threshold {limit:g})" if limit is not None else "")))
    if not bars:
        return None
    return hbar_chart("chart-parity-agreement", bars, axis_label="agreement (1 = identical)", high=1.0,
                      value_text=lambda v: f"{v:.4f}", title="agreement per output and threshold")


def sqnr_chart(report: ParityReport) -> str:
    """SQNR in dB of every output (``chart-parity-sqnr``); an infinite SQNR drawn at the cap and said so."""
    limit = report.tolerance.min_sqnr_db
    bars = [Bar(o.name if len(o.name) <= 28 else o.name[:26] + "..", max(0.0, _finite(o.sqnr_db, SQNR_CAP_DB)), mark=limit,
                tip=f"{o.name}: SQNR {o.sqnr_db:.4g} dB" + (" (identical outputs)" if math.isinf(o.sqnr_db) else ""))
            for o in report.outputs]
    return hbar_chart("chart-parity-sqnr", bars, axis_label="SQNR (dB): signal / quantization noise",
                      title="SQNR per output", value_text=lambda v: f"{v:.1f} dB")


def worst_samples_html(data: Optional[dict]) -> str:
    """The worst samples (lowest per-sample SQNR of the first output) as columns (``chart-parity-worst``) and a
    table; only where the run kept them (the Ray path keeps the worst 10 of every shard)."""
    worst = (data or {}).get("worst_samples") or []
    if not worst:
        return p("The run kept no per-sample figures (the in-process path reports the totals above; "
                 "<code>edgekit parity --ray</code> keeps the worst samples).", "muted")
    labels = [str(w["sample"]) for w in worst]
    values = [_finite(float(w["sqnr_db"]), SQNR_CAP_DB) for w in worst]
    chart = column_chart("chart-parity-worst", labels, values, axis_label="SQNR (dB)",
                         title="worst samples: per-sample SQNR of the first output")
    rows = [(str(w["sample"]), float(w["sqnr_db"]), float(w["max_abs"]), w.get("reference_top1"),
             w.get("candidate_top1"), w.get("label")) for w in worst]
    return (figure(chart, f"the {len(worst)} samples with the lowest SQNR (first output), worst first")
            + table(["sample", "SQNR dB", "max abs diff", "reference top-1", "candidate top-1", "label"], rows,
                    table_id="worst-samples"))


def parity_html(report: ParityReport) -> str:
    """The parity section: thresholds, per-output table and charts, accuracy, worst samples."""
    thresholds = {k: v for k, v in report.tolerance.to_json().items() if v not in (None, [], ())}
    present = [k for k in METRICS if any(k in o.metrics() for o in report.outputs)]
    rows = [[o.name, o.kind or "–"] + [o.metrics().get(k) for k in present] for o in report.outputs]
    html = [p(f'<span class="verdict {"pass" if report.passed else "fail"}">{"PASSED" if report.passed else "FAILED"}'
              f"</span> on {report.samples:,} samples; thresholds: "
              + (esc(", ".join(f"{k} {v}" for k, v in thresholds.items())) or "none")),
            bullets([f"FAILED {esc(f)}" for f in report.failures]),
            bullets([f"reference: <code>{esc(report.reference.path)}</code> on {esc(report.reference.runtime)}"
                     + (f" ({esc(report.reference.kernels)})" if report.reference.kernels else ""),
                     f"candidate: <code>{esc(report.candidate.path)}</code> on {esc(report.candidate.runtime)}"
                     + (f" ({esc(report.candidate.kernels)})" if report.candidate.kernels else "")]),
            table(["output", "kind"] + present, rows, table_id="parity-outputs")]
    agreement = agreement_chart(report)
    if agreement:
        html.append(figure(agreement, "agreement metrics of each output; red tick: the threshold it must reach"))
    html.append(figure(sqnr_chart(report), f"SQNR per output (infinite, i.e. identical outputs, drawn at "
                                           f"{SQNR_CAP_DB:g} dB)"))
    if report.accuracy:
        a = report.accuracy
        html.append(p(f"Accuracy on {a.labels:,} labelled samples: reference {a.reference_top1:.2%}, candidate "
                      f"{a.candidate_top1:.2%} (drop {a.drop * 100:+.2f} points)."))
    html.append("<h3>Worst samples</h3>" + worst_samples_html(report.data))
    return "".join(html)


def parity_page(report: ParityReport, title: str = "edgekit parity") -> Page:
    """report.html of `edgekit parity -o` and of `edgekit quantize` (its parity.json)."""
    page = Page(title, verdict=report.passed)
    facts: List[str] = [f"{report.samples:,} samples, {len(report.outputs)} output(s)"]
    execution = (report.data or {}).get("execution")
    if execution:
        facts.append(f"engine {esc(execution['engine'])}, {execution['workers']} worker(s), "
                     f"{execution['samples_per_s']} samples/s (measured)")
    page.facts = facts
    return page.section("Parity: reference vs candidate", parity_html(report))
