"""layers.png: cumulative SQNR and local SQNR (noise a layer adds) in graph order, the most damaging layers in red.

Layers that add no noise (local SQNR at the cap) get no bar."""
from __future__ import annotations

import math
from pathlib import Path

TOP_HIGHLIGHTED = 3


def _finite(value, cap: float) -> float:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return float("nan")
    return max(min(value, cap), -cap)


def plot_layers(report, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cap = report.meta.get("sqnr_cap_db", 120.0)
    rows = report.rows
    x = list(range(len(rows)))
    sqnr = [_finite(r["sqnr_db"], cap) for r in rows]
    # local SQNR at the cap means "added no noise": left out, it would only squash the scale
    local = [r["local_sqnr_db"] if r["local_sqnr_db"] is not None and r["local_sqnr_db"] < cap else float("nan")
             for r in rows]
    top = {r["index"] for r in report.ranked(TOP_HIGHLIGHTED)}

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(6.0, 0.35 * len(rows) + 2), 6.5), sharex=True)
    ax1.plot(x, sqnr, marker="o", color="tab:blue", label="cumulative SQNR vs reference (dB)")
    for i, r in enumerate(rows):
        if r["index"] in top:
            ax1.plot(i, sqnr[i], marker="o", markersize=11, color="tab:red", fillstyle="none")
            ax1.annotate(f"#{r['rank']}", (i, sqnr[i]), textcoords="offset points", xytext=(6, 6), color="tab:red")
    ax1.set_ylabel("cumulative SQNR (dB)")
    ax1.grid(alpha=0.3)
    ax1.legend(loc="best", fontsize=8)
    ax2.bar(x, [0.0 if math.isnan(v) else v for v in local],
            color=["tab:red" if r["index"] in top else "tab:gray" for r in rows])
    ax2.set_ylabel("local SQNR (dB)\nlower = more noise added")
    ax2.grid(alpha=0.3, axis="y")
    ax2.set_xticks(x)
    ax2.set_xticklabels([f"{r['index']} {r['op']}" for r in rows], rotation=75, fontsize=7, ha="right")
    m = report.meta
    fig.suptitle(f"{Path(m['candidate']['source']).name} vs {Path(m['reference']['source']).name}: per-layer damage "
                 f"({m['samples_used']} samples)\nred: top {TOP_HIGHLIGHTED} by local SQNR (lowest)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
