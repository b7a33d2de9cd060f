"""report.html of `edgekit lab` (table.json, ``LabTable``): the models x boards heat-map and the cell table."""
from __future__ import annotations

from typing import Optional

from edgekit.lab.results import CellFigure, LabRow, LabTable
from edgekit.report_html.page import Page, bullets, esc, figure, table
from edgekit.report_html.svg import HeatCell, heatmap


def _kib(value: Optional[int]) -> str:
    return "–" if value is None else f"{value / 1024:.1f} KiB"


def _figure(entry: Optional[CellFigure], unit: str) -> str:
    if not entry or entry.get("value") is None:
        return "–" if not entry else f"unavailable ({entry.get('method') or 'no model'})"
    return f"{entry['value']:.4g} {unit} ({entry['method']})"


def heat_cell(r: LabRow) -> HeatCell:
    """A cell's colour (instructions per inference, exact) and text (instructions, RAM, latency, bit-exactness)."""
    n = r.get("instructions_per_inference")
    if r["status"] == "ok":
        lines = (f"{n / 1e6:.3g} M instr" if n else _figure(r.get("latency_ms"), "ms"),
                 f"RAM {_kib(r.get('ram_bytes'))}",
                 "bit-exact" if r.get("bit_exact") else ("NOT bit-exact" if r.get("bit_exact") is False else "–"))
    else:
        lines = ("does not fit" if r["status"] == "does-not-fit" else "failed",)
    tip = (f"{r['model']} on {r['board']}: {r['status']}" + (f" ({r['error']})" if r.get("error") else "")
           + f"; latency {_figure(r.get('latency_ms'), 'ms')}; energy {_figure(r.get('energy_uj'), 'uJ')}")
    return HeatCell(row=r["model"], column=r["board"], value=float(n) if n and r["status"] == "ok" else None,
                    lines=lines, status=r["status"] or "pending", tip=tip)


def lab_page(lab: LabTable) -> Page:
    """The lab table as one page."""
    s, summary, timing = lab.settings, lab.summary, lab.timing
    page = Page(f"edgekit lab: models x boards ({summary['cells']} cells)", verdict=summary.get("failed", 0) == 0,
                facts=[f"{s.iterations} warm inferences on {s.inputs} seeded random inputs per cell; {s.parallel} "
                       f"cell(s) at once",
                       f"ok {summary['ok']}, does not fit {summary['does-not-fit']}, failed {summary['failed']}, "
                       f"resumed {summary['resumed']}",
                       f"wall {timing.wall_s} s (build {timing.build_s} s, run {timing.run_s} s; {esc(timing.method)})"])
    chart = heatmap("chart-lab-heatmap", [m.name for m in lab.models], [b.name for b in lab.boards],
                    [heat_cell(r) for r in lab.cells], scale_label="instructions / inference (exact, log colour)",
                    title="instructions per inference, models x boards")
    page.section("Heat-map", figure(chart, "colour: instructions per inference (exact, QEMU plugin; log scale); "
                                           "grey: no count (failed, does not fit, or a real board)"))
    rows = [(r["model"], r["board"], r["status"] + (f": {r['error']}" if r.get("error") else ""), r.get("fits"),
             r.get("ram_bytes"), r.get("flash_bytes"), r.get("instructions_per_inference"),
             _figure(r.get("latency_ms"), "ms"), _figure(r.get("energy_uj"), "uJ"), r.get("bit_exact"))
            for r in lab.cells]
    page.section("Cells", table(["model", "board", "status", "fits", "RAM (B)", "flash (B)",
                                 "instructions/inference (exact)", "latency", "energy/inference", "bit-exact"],
                                rows, table_id="cells"), bullets([esc(n) for n in lab.notes]))
    return page
