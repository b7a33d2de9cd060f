"""Reports of calib-check: calib_check.json, report.md, ranges.png and manifest.json (atomic)."""
from __future__ import annotations

from pathlib import Path
from typing import List

import numpy as np

from edgekit.artifact import Artifact, Manifest
from edgekit.atomic import atomic_output_dir
from edgekit.preprocessing.calib_check import CalibCheckReport
from edgekit.preprocessing.calib_result import CalibProvenance
from edgekit.preprocessing.live_sums import INPUT_BINS
from edgekit.provenance import host_info, tool_versions, utc_now
from edgekit.report import fmt

TOOLS = ("edgekit", "numpy", "tensorflow-cpu", "ai-edge-litert", "torch", "litert-torch", "pillow")


def markdown(report: CalibCheckReport, prov: CalibProvenance, png: bool) -> str:
    r = report
    lines = [
        "# edgekit calib-check",
        "",
        f"**Verdict: {r.verdict.upper()}**",
        "",
        *[f"- {reason}" for reason in r.reasons],
        "",
        f"- Model `{r.model['path']}` sha256 `{r.model['sha256']}` (float reference sha256 `{r.model['float_sha256'][:16]}`, {r.model['export']})",
        f"- Calibration set `{r.calib['path']}`: {r.calib['samples']} samples (fingerprint `{r.calib['fingerprint'][:16]}`, {r.calib['skipped']} skipped)",
        f"- Live data `{r.live['path']}`: {r.live['samples']} samples (fingerprint `{r.live['fingerprint'][:16]}`, {r.live['skipped']} skipped)",
        f"- Ranges: method **{r.method}** on the calibration statistics (what `edgekit quantize` would use)",
        *execution_line(r.execution),
        f"- Thresholds: {', '.join(f'{k} {v}' for k, v in r.thresholds.to_json().items())}",
        f"- Produced {prov['created']} on {prov['host']['hostname']}; tools: {', '.join(f'{k} {v}' for k, v in prov['tools'].items())}",
        "",
        "## Model input distribution (calibration vs live)",
        "",
        "| channel | calib mean | live mean | calib p1..p99 | live p1..p99 | KS | Wasserstein (rel. to range) |",
        "|---|---|---|---|---|---|---|",
    ]
    for i in r.inputs:
        c, l = i["calib"], i["live"]
        lines.append(f"| {i['channel']} | {fmt(c['mean'])} | {fmt(l['mean'])} | {fmt(c['p1'])}..{fmt(c['p99'])} | "
                     f"{fmt(l['p1'])}..{fmt(l['p99'])} | {i['ks']:.3f} | {i['wasserstein_rel']:.3f} |")
    lines += ["", "## Activation tensors, worst first", "",
              "| tensor | calibrated range | calib min..max | live min..max | live clipped | below | above | excess (rel.) |",
              "|---|---|---|---|---|---|---|---|"]
    for t in sorted(r.tensors, key=lambda t: -t["clipped"]):
        lines.append(f"| `{t['name']}` | [{fmt(t['range'][0])}, {fmt(t['range'][1])}] | {fmt(t['calib_min'])}..{fmt(t['calib_max'])} | "
                     f"{fmt(t['live_min'])}..{fmt(t['live_max'])} | {t['clipped']:.3%} | {t['clipped_below']:.3%} | "
                     f"{t['clipped_above']:.3%} | {t['excess']:.3f} |")
    if r.effect:
        lines += ["", "## Effect on the INT8 model (run on the live data, against the float model)", ""]
        if not r.effect.get("available"):
            lines.append(f"Not available: {r.effect.get('reason')}")
        else:
            lines += ["| int8 calibrated on | top-1 agreement | cosine | SQNR dB | accuracy (labels) |", "|---|---|---|---|---|"]
            for key, label in (("with_calibration_set", "this calibration set"), ("with_live_data", "the live data (oracle)")):
                e = r.effect[key]
                o = e["outputs"][0]
                acc = e.get("accuracy")
                acc_text = f"{acc['candidate_top1']:.2%} (float {acc['reference_top1']:.2%})" if acc else "–"
                lines.append(f"| {label} | {fmt(o.get('top1_agreement', '–'))} | {fmt(o['cosine'])} | {fmt(o['sqnr_db'])} | {acc_text} |")
    if r.errors:
        lines += ["", "## Samples skipped", ""]
        for where, errs in r.errors.items():
            lines += [f"- {where}: {e}" for e in errs[:50]]
    if png:
        lines += ["", "![calibrated vs live ranges](ranges.png)"]
    return "\n".join(lines) + "\n"


def execution_line(e: Optional[Execution]) -> List[str]:
    """How the live passes ran (engine, workers, throughput), one report line."""
    if not e:
        return []
    return [f"- Live data read and run by {e['engine']} with {e['workers']} worker(s): {e['samples']:,} samples in "
            f"{e['wall_time_s']:.1f} s ({e['samples_per_s']} samples/s); input distances from {INPUT_BINS}-bin histograms "
            "on the calibration range of each channel (tails exact)"]


def ranges_png(path: Path, report: CalibCheckReport) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tensors = report.tensors
    if not tensors:
        return False
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(tensors) + 1.5))
    y = np.arange(len(tensors))
    for k, t in enumerate(tensors):
        lo, span = t["range"][0], max(t["range"][1] - t["range"][0], 1e-12)  # calibrated range -> [0, 1]
        live = [(t["live_min"] - lo) / span, (t["live_max"] - lo) / span]
        ax.plot(live, [k + 0.15] * 2, color="tab:red", lw=4, label="live" if k == 0 else None)
        ax.plot([0, 1], [k - 0.15] * 2, color="tab:blue", lw=4, label="calibrated range" if k == 0 else None)
    ax.set_yticks(y)
    ax.set_yticklabels([f"{t['name'][:40]} ({t['clipped']:.1%})" for t in tensors], fontsize=7)
    ax.axvline(0, color="gray", lw=0.5)
    ax.axvline(1, color="gray", lw=0.5)
    ax.set_xlabel("value, relative to the calibrated range (0 = lo, 1 = hi); label: share of live values clipped")
    ax.set_title(f"calib-check: {report.verdict}")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def write_reports(outdir: Path, report: CalibCheckReport) -> List[str]:
    prov: CalibProvenance = {"created": utc_now(), "host": host_info(), "tools": tool_versions(TOOLS)}
    with atomic_output_dir(outdir) as stage:
        (stage / "calib_check.json").write_text(report.result(prov).dumps())
        png = ranges_png(stage / "ranges.png", report)
        (stage / "report.md").write_text(markdown(report, prov, png))
        manifest = Manifest(command="calib-check", extra={"calib": report.calib, "live": report.live})
        art = manifest.add(Artifact.from_file(stage / "calib_check.json", format="calib-check-report", stage="calib-check",
                                              params={"method": report.method, "thresholds": report.thresholds.to_json()}))
        manifest.add(Artifact.from_file(stage / "report.md", format="markdown", stage="report", parent=art))
        if png:
            manifest.add(Artifact.from_file(stage / "ranges.png", format="png", stage="report", parent=art))
        manifest.write(stage / "manifest.json")
        return sorted(p.name for p in stage.iterdir())
