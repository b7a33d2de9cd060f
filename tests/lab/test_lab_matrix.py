"""edgekit lab: a models x boards matrix, for real (quantize, firmware builds, QEMU runs, a board that fails),
resumable."""
import json
import shutil

import pytest

from edgekit.errors import UserError
from tests.conftest import DEMO_MODEL, DIGITS, MLPERF
from tests.report_html.chromium import LAB_CHARTS, check_report_page

needs_qemu = pytest.mark.skipif(not (shutil.which("qemu-system-arm") and shutil.which("arm-none-eabi-gcc")),
                                reason="qemu-system-arm and arm-none-eabi-gcc are needed")


def test_matrix_problems_are_reported_together(tmp_path):
    from edgekit.lab.matrix import load_matrix

    path = tmp_path / "m.yaml"
    path.write_text(f"""
models:
  - {{name: ad, model: {MLPERF / 'ad_autoencoder_int8.tflite'}}}
  - {{name: ad, model: missing.tflite}}
  - {{name: float, model: {MLPERF / 'ad_autoencoder.h5'}}}
boards:
  - {{qemu: mps9-nothing}}
  - {{serial: /dev/ttyACM0, instances: 2}}
iterations: 0
colour: blue
""")
    with pytest.raises(UserError) as info:
        load_matrix(path)
    message = info.value.message
    for part in ("missing.tflite does not exist", "is not an int8 .tflite; add calibration", "'mps9-nothing' is not a QEMU board",
                 "instances > 1 only for qemu", "iterations: input should be greater than 0 (got 0)",
                 "model names used twice: ad", "colour: unknown key", f"{path}:10: colour"):
        assert part in message, (part, message)


@needs_qemu
@pytest.mark.slow
def test_matrix_runs_every_cell_marks_a_failing_board_and_resumes(cli, capsys, tmp_path):
    from tests.boardlab.lab import free_port

    nowhere = f"127.0.0.1:{free_port()}"
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(f"""
models:
  - {{name: ad, model: {MLPERF / 'ad_autoencoder_int8.tflite'}}}
  - {{name: digits, model: {DEMO_MODEL}, calibration: {DIGITS / 'calib'}}}
boards:
  - {{qemu: mps2-an386}}
  - {{labgrid: rack-9, coordinator: "{nowhere}", name: lab-rack-9}}
iterations: 2
inputs: 2
parallel: 2
""")
    out = tmp_path / "out"
    assert cli("lab", matrix, "-o", out) == 4   # a failed board: non-zero, but every other cell ran
    printed = capsys.readouterr().out
    assert "4 cells: 2 ok, 0 do not fit, 2 failed" in printed and "cannot be reached" in printed
    table = json.loads((out / "table.json").read_text())
    cells = {(r["model"], r["board"]): r for r in table["cells"]}
    for model in ("ad", "digits"):
        ok = cells[(model, "mps2-an386")]
        assert ok["status"] == "ok" and ok["fits"] is True and ok["bit_exact"] is True
        assert ok["instructions_per_inference"] > 0 and ok["ram_bytes"] > 0 and ok["flash_bytes"] > ok["ram_bytes"] / 100
        assert ok["latency_ms"]["method"] == "estimated" and ok["energy_uj"]["method"] == "estimated"
        failed = cells[(model, "lab-rack-9")]
        assert failed["status"] == "failed" and nowhere in failed["error"] and failed["instructions_per_inference"] is None
    assert table["models"][1]["quantized"] is True and (out / "models" / "digits" / "model_int8.tflite").is_file()
    markdown = (out / "table.md").read_text()
    assert "| ad | mps2-an386 | ok | yes |" in markdown and "(estimated)" in markdown
    assert (out / "heatmap.png").stat().st_size > 5000
    # report.html of this real run in headless Chromium: no console error, the heat-map rendered, a screenshot
    check_report_page(out / "report.html", LAB_CHARTS, tmp_path / "lab_report.png")

    # rerun: finished cells and the quantized model are reused, the failed board is tried again
    assert cli("lab", matrix, "-o", out) == 4
    again = json.loads((out / "table.json").read_text())
    assert again["summary"]["resumed"] == 2 and again["models"][1]["quantized"] == "earlier run"
    resumed = {(r["model"], r["board"]): r for r in again["cells"]}
    assert resumed[("ad", "mps2-an386")]["instructions_per_inference"] == cells[("ad", "mps2-an386")]["instructions_per_inference"]
    assert resumed[("ad", "lab-rack-9")]["status"] == "failed" and not resumed[("ad", "lab-rack-9")].get("resumed")
