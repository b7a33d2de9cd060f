"""report.md lines of a dataset-scale run."""
from __future__ import annotations

from typing import List, Optional


def execution_lines(data: Optional[dict]) -> List[str]:
    """report.md lines: how the run went (engine, workers, throughput), corrupt samples, worst samples."""
    if not data or "execution" not in data:
        return []
    e = data["execution"]
    lines = ["", "## How it ran", "",
             f"Engine {e['engine']}, {e['workers']} worker(s), {e['samples']:,} samples in {e['wall_time_s']:.1f} s "
             f"({e['samples_per_s']} samples/s)."]
    corrupt = data.get("corrupt") or {}
    if corrupt.get("count"):
        lines += ["", f"{corrupt['count']} corrupt sample(s) skipped:", ""]
        lines += [f"- {n}" for n in corrupt["samples"]]
        if corrupt["count"] > len(corrupt["samples"]):
            lines.append(f"- ... and {corrupt['count'] - len(corrupt['samples'])} more")
    worst = data.get("worst_samples") or []
    if worst:
        lines += ["", "Worst samples (lowest per-sample SQNR of the first output):", ""]
        lines += [f"- {w['sample']}: SQNR {w['sqnr_db']:.2f} dB, max abs {w['max_abs']:.4g}"
                  + (f", top-1 {w['reference_top1']} -> {w['candidate_top1']}" if "candidate_top1" in w else "") for w in worst[:10]]
    return lines
