"""report.html of `edgekit deploy`, from deploy.json (``DeployReport``), the firmware's firmware.json
(``FirmwareInfo``: the memory plan) and the quantize stage's ``ParityReport``."""
from __future__ import annotations

from edgekit.firmware.results import DeployReport, FirmwareInfo
from edgekit.parity.result import ParityReport
from edgekit.report_html.memory import fit_table, memory_sections
from edgekit.report_html.page import Page, bullets, esc, p
from edgekit.report_html.parity import parity_html
from edgekit.report_html.work import cycles_section, per_op_section


def deploy_page(report: DeployReport, firmware: FirmwareInfo, parity: ParityReport) -> Page:
    """The deploy report as one page: parity, fit and memory, device outputs, work per op, estimates."""
    b, f, d, e = report.board, report.firmware, report.device, report.estimates
    be = d.outputs_bit_exact
    page = Page(f"edgekit deploy: {report.model.source} on {b.board}", verdict=report.passed, facts=[
        f"int8 model sha256 <code>{esc(report.model.int8_sha256)}</code> ({report.model.int8_bytes:,} bytes)",
        f"board <code>{esc(b.board)}</code>: {esc(b.core)}, {(b.clock_hz or 0) / 1e6:g} MHz, "
        f"flash {b.flash_bytes or 0:,} B, RAM {b.ram_bytes or 0:,} B",
        f"signed {esc(report.signature.created)} on {esc(report.signature.host.get('hostname'))}"])
    page.body.append(bullets([f"FAILED: {esc(x)}" for x in report.failures]))
    page.section("1. Parity: float32 vs int8 (LiteRT, held-out data)", parity_html(parity))
    fits = [(name, getattr(f.fits, name).used, getattr(f.fits, name).available, getattr(f.fits, name).free,
             getattr(f.fits, name).fits, method) for name, method in (("flash", f.flash["method"]),
                                                                      ("ram", f.ram_method))]
    memory = "".join(f"<h3>{esc(heading)}</h3>{html}" for heading, html in memory_sections(firmware))
    page.section("2. Firmware fit and memory", fit_table(fits), p(
        f"tensor arena {f.arena_bytes:,} B (offline plan); runtime state {f.state_bytes:,} B reserved"
        + (f", {f.state_used_on_device_bytes:,} B used on the device" if f.state_used_on_device_bytes else "")
        + "; operators: " + esc(", ".join(f"{k} x{v}" for k, v in f.ops.items()))), memory)
    verdict = "bit-exact" if be.value else "NOT bit-exact"
    page.section("3. Device outputs vs the host reference", p(
        f"{be.samples or 0} samples on <code>{esc(d.device)}</code>: <b>{verdict}</b> with {esc(be.reference)} "
        f"({be.differing_elements} of {be.total_elements} output elements differ, max {be.max_abs_diff_lsb} LSB)."))
    work = p(f"<b>{d.instructions_per_inference:,} instructions per inference</b> (exact, QEMU plugin)"
             + (f", {d.macs_per_inference:,} MACs, {d.instructions_per_mac:.2f} instructions per MAC"
                if d.instructions_per_mac and d.macs_per_inference else "") + ".") \
        if d.instructions_per_inference else p("Not counted.", "muted")
    page.section("4. Work per inference (exact instruction counts, QEMU)", work,
                 per_op_section(d.per_op_instructions, e.cycles, board=b.board))
    lat, en = e.latency_ms, e.energy_uj
    figures = [f'latency per inference: <span class="estimate">{lat.value:.4g} ms (estimated)</span> = '
               f"{esc(lat.source)}" if lat.value is not None else f"latency: unavailable ({esc(lat.reason)})",
               f'energy per inference: <span class="estimate">{en.value:.4g} µJ (estimated)</span> = '
               f"{esc(en.source)}" if en.value is not None else f"energy: unavailable ({esc(en.reason)})"]
    page.section(f"5. Latency and energy at {(b.clock_hz or 0) / 1e6:g} MHz: ESTIMATES, not measurements",
                 bullets(figures), cycles_section(e.cycles))
    return page
