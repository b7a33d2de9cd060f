"""report.html of `edgekit firmware` (firmware.json, ``FirmwareInfo``): fit, flash/RAM split, memory plan."""
from __future__ import annotations

from edgekit.firmware.results import FirmwareInfo
from edgekit.report_html.memory import fit_table, memory_sections
from edgekit.report_html.page import Page, esc, p, table


def firmware_page(info: FirmwareInfo) -> Page:
    """The generated project's memory figures as one page."""
    b = info.board
    page = Page(f"edgekit firmware: {info.model.source} for {b.board} ({info.runtime} runtime)",
                verdict=info.fits_board if info.fits else None, facts=[
                    f"model sha256 <code>{esc(info.model.sha256)}</code> ({info.model.bytes:,} bytes)",
                    f"board <code>{esc(b.board)}</code>: {esc(b.core)}, flash {b.flash_bytes or 0:,} B, "
                    f"RAM {b.ram_bytes or 0:,} B",
                    "built: " + ("yes, " + esc(info.build.get("toolchain")) if info.build.get("built") else
                                 "no (" + esc(info.build.get("reason", "not requested")) + ")")])
    if info.fits:
        rows = [(name, fit.used, fit.available, fit.free, fit.fits, fit.method)
                for name, fit in (("flash", info.fits.flash), ("ram", info.fits.ram))]
        page.section("Fit", fit_table(rows))
    for heading, html in memory_sections(info):
        page.section(heading, html)
    page.section("Operators", table(["#", "operator", "MACs", "where"],
                                    [(o.get("index", k), o["name"], o.get("macs"), o["location"])
                                     for k, o in enumerate(info.ops)], table_id="ops"),
                 p("Figures and their methods: <code>firmware.json</code>; integration: <code>README.md</code>.",
                   "muted"))
    return page
