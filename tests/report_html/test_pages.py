"""The pages built from typed results (no browser): each report kind has its charts, figures say how they were
obtained, and what a result lacks is said, not drawn."""
from __future__ import annotations

import json
from pathlib import Path

from edgekit.parity.result import ParityReport
from edgekit.report_html.lab import heat_cell
from edgekit.report_html.parity import parity_page
from edgekit.report_html.run import run_page
from edgekit.run.results import read_run_report

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "report_html"


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def test_parity_page_draws_the_worst_samples_when_the_run_kept_them():
    report = ParityReport.from_json(_json(FIXTURES / "deploy" / "quantize" / "parity.json"))
    without = parity_page(report).render()
    assert 'id="chart-parity-agreement"' in without and 'id="chart-parity-worst"' not in without
    assert "kept no per-sample figures" in without
    worst = [{"sample": f"s{i}", "sqnr_db": 20.0 + i, "max_abs": 0.5, "reference_top1": 3, "candidate_top1": 5}
             for i in range(4)]
    html = parity_page(report.with_data({**(report.data or {}), "worst_samples": worst})).render()
    assert 'id="chart-parity-worst"' in html and html.count('class="column"') == 4
    assert 'data-label="s0" data-value="20"' in html and 'id="worst-samples"' in html


def test_mcu_run_page_has_the_per_op_chart_and_labels_its_estimates():
    report = read_run_report(_json(FIXTURES / "deploy" / "run" / "run.json"))
    html = run_page(report).render()
    assert 'id="chart-per-op"' in html and 'id="chart-cycles"' in html and 'id="chart-latency"' not in html
    assert html.count('class="bar"') == len(report.work.per_op_instructions) + sum(
        1 for row in report.work.cycles_estimated.classes.values() if row.count)
    assert "latency per op ESTIMATED" in html and "(exact, QEMU ekcount plugin)" in html


def test_lab_cells_without_a_count_are_grey_and_say_why():
    row = {"model": "m", "board": "b", "device": "labgrid:b", "model_sha256": None, "status": "failed", "fits": None,
           "ram_bytes": None, "flash_bytes": None, "instructions_per_inference": None, "latency_ms": None,
           "energy_uj": None, "bit_exact": None, "error": "board unavailable", "wall_s": None}
    cell = heat_cell(row)
    assert cell.value is None and cell.lines == ("failed",) and "board unavailable" in cell.tip
