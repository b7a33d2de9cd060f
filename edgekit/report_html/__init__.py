"""report.html beside every report.md: one self-contained page per report kind (deploy, firmware, run, parity,
lab), rendered from the typed results (``DeployReport``, ``FirmwareInfo``, ``RunReport``, ``ParityReport``,
``LabTable``) with inline SVG charts made in Python: no script, no network, no external fonts or images.

``edgekit.report_html.page.write_page(path, page)`` writes one atomically; ``render_folder(folder)`` re-renders
the page of an output folder from the JSON files in it.
"""
from __future__ import annotations
