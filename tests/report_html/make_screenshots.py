"""Write the docs' screenshots of report.html (docs/images/report_deploy.png, docs/images/report_lab.png) with
headless Chromium, from the committed results of a real demo deploy and lab run (tests/fixtures/report_html).

    python -m tests.report_html.make_screenshots            # render the fixtures, screenshot them
    python -m tests.report_html.make_screenshots --refresh  # first re-run the demo deploy and a 1-model lab
                                                            # (QEMU, ~3 min) and replace the fixtures with theirs
"""
from __future__ import annotations

import argparse
import re
import shutil
import tempfile
from pathlib import Path

from tests.report_html.chromium import DEPLOY_CHARTS, LAB_CHARTS, Chromium, check_report_page

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "report_html"
IMAGES = REPO / "docs" / "images"
DEPLOY_FILES = ("deploy.json", "firmware/firmware.json", "quantize/parity.json", "run/run.json")
LAB_MATRIX = """models:
  - {{name: ad, model: {model}}}
boards:
  - {{qemu: mps2-an386}}
  - {{qemu: mps2-an505}}
iterations: 1
inputs: 1
"""


def _relative(text: str, *roots: Path) -> str:
    """Paths of this machine out of the committed JSON (repo-relative, or out/ for the temporary folder)."""
    for root, to in zip(roots, ("", "out/")):
        text = re.sub(re.escape(str(root)) + "/?", to, text)
    return text


def refresh(work: Path) -> None:
    """Run the demo deploy and a small lab for real, then copy their result files into the fixtures."""
    from edgekit.cli import main

    deploy_out, lab_out = work / "demo", work / "lab"
    assert main(["deploy", str(REPO / "edgekit/demo/digits_cnn.pt2"), "--calib", str(REPO / "calibration_data/digits/calib"),
                 "--eval-data", str(REPO / "calibration_data/digits/eval"), "--board", "mps2-an386",
                 "-o", str(deploy_out)]) == 0
    matrix = work / "matrix.yaml"
    matrix.write_text(LAB_MATRIX.format(model=REPO / "tests/fixtures/mlperf_tiny/ad_autoencoder_int8.tflite"))
    assert main(["lab", str(matrix), "-o", str(lab_out)]) == 0
    for name in DEPLOY_FILES:
        (FIXTURES / "deploy" / name).parent.mkdir(parents=True, exist_ok=True)
        (FIXTURES / "deploy" / name).write_text(_relative((deploy_out / name).read_text(), REPO, work))
    (FIXTURES / "lab").mkdir(parents=True, exist_ok=True)
    (FIXTURES / "lab" / "table.json").write_text(_relative((lab_out / "table.json").read_text(), REPO, work))


def main() -> None:
    from edgekit.report_html.render import render_folder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refresh", action="store_true", help="re-run the demo deploy and lab, replace the fixtures")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="edgekit-screenshots-"))
    try:
        if args.refresh:
            refresh(work)
        IMAGES.mkdir(parents=True, exist_ok=True)
        with Chromium() as browser:
            for kind, charts in (("deploy", DEPLOY_CHARTS), ("lab", LAB_CHARTS)):
                shutil.copytree(FIXTURES / kind, work / "pages" / kind)
                shot = IMAGES / f"report_{kind}.png"
                result = check_report_page(render_folder(work / "pages" / kind), charts, shot, browser)
                print(f"wrote {shot.relative_to(REPO)} ({shot.stat().st_size:,} bytes; {len(result.charts)} charts, "
                      f"no console errors)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
