"""report.html of `edgekit run` (run.json, ``RunReport``): latency, memory, energy, and on an MCU the work per
operator and the cycle estimate."""
from __future__ import annotations

from typing import List, Optional

from edgekit.report_html.page import Page, bullets, esc, figure, p, table
from edgekit.report_html.svg import column_chart
from edgekit.report_html.work import cycles_section, per_op_section
from edgekit.run.results import RunReport


def _ms(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value, 4)


def latency_html(report: RunReport) -> str:
    """Cold start and latency percentiles (``chart-latency``, measured) when the device measured latencies."""
    lat, cold = report.latency_ms, report.cold_start_ms
    if not lat.count:
        return p(esc(report.latency_note) + ".", "muted")
    keys = [k for k in ("min", "p50", "p90", "p99", "max") if getattr(lat, k) is not None]
    chart = column_chart("chart-latency", keys, [getattr(lat, k) for k in keys], axis_label="ms (measured)",
                         title="latency percentiles of the warm iterations")
    rows = [("runtime import", _ms(cold.runtime_import)), ("load / init", _ms(cold.load)),
            ("first inference", _ms(cold.first_inference))] + [(k, _ms(getattr(lat, k))) for k in keys]
    return (figure(chart, f"{lat.count:,} iterations: {report.latency_note}")
            + table(["figure", "ms (measured)"], rows, table_id="latency")
            + (p(f"throughput {report.throughput_ips:.4g} inferences/s (measured)") if report.throughput_ips else ""))


def run_page(report: RunReport) -> Page:
    """The run report as one page."""
    device, energy, work = report.device, report.energy_uj_per_inference, report.work
    page = Page(f"edgekit run on {device.name}", verdict=None if report.complete else False, facts=[
        f"artifact <code>{esc(report.artifact.path)}</code> sha256 <code>{esc(report.artifact.sha256)}</code>",
        f"device <code>{esc(device.name)}</code> ({esc(device.kind)}), profile <code>{esc(device.profile)}</code>",
        "runtime: " + esc(", ".join(f"{k} {v}" for k, v in report.runtime.items() if v is not None)),
        f"signed {esc(report.signature.created)} on {esc(report.signature.host.get('hostname'))}"])
    if not report.complete:
        page.body.append(p(f"<b>INCOMPLETE RUN:</b> {esc(report.incomplete_reason)}"))
    page.section("Latency", latency_html(report))
    memory = [f"{esc(k)}: {v:,}" if isinstance(v, int) else f"{esc(k)}: {esc(v)}"
              for k, v in report.memory.present().items()]
    page.section("Memory", bullets(memory) or p("not reported", "muted"))
    energy_text = (f"unavailable: {esc(energy.reason)}" if energy.method == "unavailable" else
                   f"<b>{energy.value:.4g} µJ</b> ({esc(energy.method)}; source: {esc(energy.source)})")
    page.section("Energy per inference", p(energy_text, "estimate" if energy.method == "estimated" else ""))
    if work.instructions_per_inference:
        facts: List[str] = [f"{work.instructions_per_inference:,} instructions per inference (exact, QEMU plugin)"]
        if work.latency_ms_estimated and work.latency_ms_estimated.value is not None:
            facts.append(f'latency <span class="estimate">{work.latency_ms_estimated.value:.4g} ms (estimated)</span>'
                         f" = {esc(work.latency_ms_estimated.source)}")
        page.section("Work per inference", bullets(facts),
                     per_op_section(work.per_op_instructions or [], work.cycles_estimated,
                                    board=work.board or device.name))
        page.section("Cycles (estimated)", cycles_section(work.cycles_estimated))
    return page
