"""Re-render report.html of an output folder from the typed results in it (deploy.json with firmware/ and
quantize/, table.json of a lab, run.json, firmware.json or parity.json)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

from edgekit.errors import UserError
from edgekit.report_html.page import Page, write_page


def _load(path: Path) -> Dict[str, Any]:
    return {k: v for k, v in json.loads(path.read_text()).items() if k != "schema"}


def folder_page(folder: Path) -> Page:
    """The page of an edgekit output folder, by the result file it holds."""
    from edgekit.firmware.results import DeployReport, read_firmware_info
    from edgekit.parity.result import ParityReport

    folder = Path(folder)
    if (folder / "deploy.json").is_file():
        from edgekit.report_html.deploy import deploy_page

        return deploy_page(DeployReport.model_validate(_load(folder / "deploy.json")),
                           read_firmware_info(_load(folder / "firmware" / "firmware.json")),
                           ParityReport.from_json(_load(folder / "quantize" / "parity.json")))
    if (folder / "table.json").is_file():
        from edgekit.lab.results import LabTable
        from edgekit.report_html.lab import lab_page

        return lab_page(LabTable.model_validate(_load(folder / "table.json")))
    if (folder / "run.json").is_file():
        from edgekit.report_html.run import run_page
        from edgekit.run.results import read_run_report

        return run_page(read_run_report(_load(folder / "run.json")))
    if (folder / "firmware.json").is_file():
        from edgekit.report_html.firmware import firmware_page

        return firmware_page(read_firmware_info(_load(folder / "firmware.json")))
    if (folder / "parity.json").is_file():
        from edgekit.report_html.parity import parity_page

        return parity_page(ParityReport.from_json(_load(folder / "parity.json")))
    raise UserError(f"{folder} holds no edgekit result (deploy.json, table.json, run.json, firmware.json, parity.json)",
                    fix="pass an output folder of edgekit deploy, lab, run, firmware, parity or quantize")


def render_folder(folder: Path) -> Path:
    """Write ``folder``/report.html from the results in it; returns its path."""
    return write_page(Path(folder) / "report.html", folder_page(folder))
