"""The matrix table: table.json (every cell with the method of every figure), table.md, heatmap.png, report.html."""
from __future__ import annotations

import math
import platform
from pathlib import Path
from typing import Dict, List, Optional

from edgekit import __version__
from edgekit.lab.results import (CellFigure, LabBoard, LabModel, LabRow, LabSettings, LabTable, LabTiming,
                                 QuantizedModel)


def table_json(matrix, rows: List[LabRow], models: Dict[str, QuantizedModel], *, workers: int,
               wall_s: float, build_s: float, run_s: float) -> LabTable:
    counts = {status: sum(1 for r in rows if r["status"] == status) for status in ("ok", "does-not-fit", "failed")}
    return LabTable(
        edgekit_lab=__version__,
        matrix=str(matrix.source) if matrix.source else None,
        models=[LabModel(name=m.name, model=str(m.model),
                         int8=str(models[m.name]["int8"]) if models[m.name].get("int8") else None,
                         quantized=models[m.name].get("quantized"), error=models[m.name].get("error"))
                for m in matrix.models],
        boards=[LabBoard(name=b.name, device=b.device, instances=b.instances) for b in matrix.boards],
        settings=LabSettings(iterations=matrix.iterations, inputs=matrix.inputs, parallel=workers),
        cells=rows,
        summary={**counts, "resumed": sum(1 for r in rows if r.get("resumed")), "cells": len(rows)},
        timing=LabTiming(wall_s=round(wall_s, 2), build_s=round(build_s, 2), run_s=round(run_s, 2),
                         method="measured: host wall clock of this edgekit lab run"),
        host=platform.node(),
        notes=["instructions: exact (QEMU TCG plugin) on QEMU boards; not counted on real boards",
               "latency and energy carry their method (measured | estimated) and source per cell",
               "bit-exact: device outputs vs LiteRT BUILTIN_REF on the same int8 inputs"],
    )


def _kib(value: Optional[int]) -> str:
    return "–" if value is None else f"{value / 1024:.1f} KiB"


def _figure(entry: Optional[CellFigure], unit: str) -> str:
    if not entry or entry.get("value") is None:
        return "–" if not entry else f"unavailable ({entry.get('method') or 'no model'})"
    return f"{entry['value']:.4g} {unit} ({entry['method']})"


def markdown(table: LabTable) -> str:
    s, summary, timing = table.settings, table.summary, table.timing
    lines = [f"# Models x boards ({summary['cells']} cells)", "",
             f"{s.iterations} warm inferences on {s.inputs} seeded random inputs per cell; {s.parallel} "
             f"cell(s) at once; wall {timing.wall_s} s (build {timing.build_s} s, run "
             f"{timing.run_s} s). ok {summary['ok']}, does not fit "
             f"{summary['does-not-fit']}, failed {summary['failed']}, resumed "
             f"{summary['resumed']}.", "",
             "| model | board | status | fits | RAM | flash | instructions/inference | latency | energy/inference | bit-exact |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in table.cells:
        instructions = f"{r['instructions_per_inference']:,} (exact, QEMU)" if r.get("instructions_per_inference") else "–"
        fits = {True: "yes", False: "no", None: "–"}[r.get("fits")]
        exact = {True: "yes", False: "NO", None: "–"}[r.get("bit_exact")]
        status = r["status"] + (f": {r['error']}" if r.get("error") else "")
        lines.append(f"| {r['model']} | {r['board']} | {status.replace('|', '/')} | {fits} | {_kib(r.get('ram_bytes'))} | "
                     f"{_kib(r.get('flash_bytes'))} | {instructions} | {_figure(r.get('latency_ms'), 'ms')} | "
                     f"{_figure(r.get('energy_uj'), 'uJ')} | {exact} |")
    lines += ["", *[f"- {note}" for note in table.notes], ""]
    return "\n".join(lines)


def heatmap(table: LabTable, path: Path) -> None:
    """Models x boards; colour = log10 instructions per inference; text: instructions, RAM, bit-exactness."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    models = [m.name for m in table.models]
    boards = [b.name for b in table.boards]
    grid = np.full((len(models), len(boards)), np.nan)
    fig, ax = plt.subplots(figsize=(1.9 * len(boards) + 2.5, 0.9 * len(models) + 1.8))
    for r in table.cells:
        i, j = models.index(r["model"]), boards.index(r["board"])
        n = r.get("instructions_per_inference")
        if n:
            grid[i, j] = math.log10(n)
    image = ax.imshow(grid, cmap="viridis", aspect="auto")
    for r in table.cells:
        i, j = models.index(r["model"]), boards.index(r["board"])
        if r["status"] == "ok":
            n = r.get("instructions_per_inference")
            text = (f"{n / 1e6:.3g} M instr" if n else _figure(r.get("latency_ms"), "ms")) + \
                   f"\nRAM {_kib(r.get('ram_bytes'))}" + ("" if r.get("bit_exact") else "\nNOT bit-exact")
        else:
            text = "does not fit" if r["status"] == "does-not-fit" else "failed"
        dark = r["status"] == "ok" and not np.isnan(grid[i, j]) and grid[i, j] < np.nanmean(grid)   # readable on viridis
        ax.text(j, i, text, ha="center", va="center", fontsize=7, color="white" if dark else "black")
    ax.set_xticks(range(len(boards)), boards, rotation=20, ha="right")
    ax.set_yticks(range(len(models)), models)
    ax.set_title("instructions per inference (exact, QEMU plugin; log10 colour)")
    fig.colorbar(image, ax=ax, label="log10 instructions / inference")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_table(folder: Path, table: LabTable) -> None:
    (folder / "table.json").write_text(table.dumps())
    (folder / "table.md").write_text(markdown(table))
    heatmap(table, folder / "heatmap.png")
    from edgekit.report_html.lab import lab_page
    from edgekit.report_html.page import write_page

    write_page(folder / "report.html", lab_page(table))
