"""`edgekit deploy`: quantize -> firmware -> build -> QEMU run -> one report, on models from the PyTorch path.

The demo command is exactly what `make demo` runs (with a temporary output folder). The MobileNet-style net
(tests/firmware/mobilenet_like.py) brings the ops the PyTorch path emits (TRANSPOSE, PAD, HARD_SWISH, MEAN, ...).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from edgekit.errors import CalibrationDataError, EdgekitError, UserError
from tests.conftest import DEMO_MODEL, DIGITS
from tests.report_html.chromium import DEPLOY_CHARTS, check_report_page

needs_qemu = pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                                reason="qemu-system-arm or arm-none-eabi-gcc is not installed")


def _check_report(out: Path, report: dict) -> None:
    for name in ("report.md", "deploy.json", "manifest.json", "per_op_instructions.png", "quantize/model_int8.tflite",
                 "quantize/parity.json", "firmware/firmware.json", "firmware/build/firmware.elf", "run/run.json"):
        assert (out / name).is_file(), name
    assert json.loads((out / "deploy.json").read_text())["passed"] == report["passed"]
    f, d, e = report["firmware"], report["device"], report["estimates"]
    assert f["fits_board"] and f["fits"]["flash"]["used"] == f["flash_bytes"] and f["fits"]["ram"]["used"] == f["ram_bytes"]
    assert f["ram_bytes"] < f["ram_static_estimate_bytes"] + 16384 and "measured on the device" in f["ram_method"]
    be = d["outputs_bit_exact"]
    assert be["value"] is True and be["differing_elements"] == 0 and be["reference"].startswith("LiteRT")
    assert d["instructions_per_inference"] > 0 and d["instructions_per_mac"] > 0
    assert sum(o["instructions"] for o in d["per_op_instructions"]) < d["instructions_per_inference"]
    assert e["latency_ms"]["method"] == "estimated" and e["energy_uj"]["method"] == "estimated"
    assert "source" in e["latency_ms"] and "source" in e["energy_uj"]
    cycles = e["cycles"]  # per instruction class x the core's timing; the latency is derived from it
    assert cycles["method"] == "estimated" and cycles["instructions"] == d["instructions_per_inference"]
    assert cycles["latency_ms"] == pytest.approx(e["latency_ms"]["value"]) and "TRM" in cycles["source"]
    assert sum(r["cycles"] for r in cycles["classes"].values()) == pytest.approx(cycles["cycles"])
    assert 1.0 <= cycles["cycles_per_instruction"] < 3.0
    manifest = json.loads((out / "manifest.json").read_text())
    stages = [a["stage"] for a in manifest["artifacts"]]
    assert stages.index("quantize") < stages.index("compile") < stages.index("run")
    text = (out / "report.md").read_text()
    assert "ESTIMATES, not measurements" in text and "bit-exact" in text and "per_op_instructions.png" in text
    assert "report.html" in {Path(a["path"]).name for a in manifest["artifacts"]}
    for page in ("report.html", "run/report.html", "firmware/report.html", "quantize/report.html"):
        assert (out / page).is_file(), page
    # the page of this real run in headless Chromium: no console error, every chart rendered, a screenshot
    check_report_page(out / "report.html", DEPLOY_CHARTS, out.parent / "deploy_report.png")


@pytest.mark.slow
@needs_qemu
def test_demo_deploy_like_make_demo(tmp_path, cli, capsys):
    out = tmp_path / "demo"
    code = cli("deploy", DEMO_MODEL, "--calib", DIGITS / "calib", "--eval-data", DIGITS / "eval",
               "--board", "mps2-an386", "-o", out)
    printed = capsys.readouterr().out
    assert code == 0, printed
    report = json.loads((out / "deploy.json").read_text())
    assert report["passed"] and report["parity"]["passed"]
    _check_report(out, report)
    assert report["parity"]["accuracy"]["candidate_top1"] > 0.9
    for phrase in ("parity FP32 vs INT8: PASSED", "bit-exact", "instructions per inference", "ESTIMATED at 25 MHz"):
        assert phrase in printed


@pytest.mark.slow
@needs_qemu
def test_mobilenet_like_from_pytorch_deploys_bit_exact(tmp_path):
    from edgekit.firmware.deploy import DeployOptions, deploy

    rng = np.random.default_rng(11)
    calib, evaluation = tmp_path / "calib.npy", tmp_path / "eval.npy"
    np.save(calib, rng.standard_normal((24, 3, 32, 32)).astype(np.float32))
    np.save(evaluation, rng.standard_normal((8, 3, 32, 32)).astype(np.float32))
    out = tmp_path / "mnl"
    result = deploy("tests.firmware.mobilenet_like:mobilenet_like", calib, out,
                    DeployOptions(eval_data=evaluation, device_samples=2))
    report = result.report.to_json()
    _check_report(out, report)
    assert {"TRANSPOSE", "PAD", "HARD_SWISH", "DEPTHWISE_CONV_2D", "ADD", "MEAN"} <= set(report["firmware"]["ops"])
    # random data on a random net: the FP32/INT8 verdict may go either way; every other check must pass
    assert all(f.startswith("parity") for f in result.failures), result.failures


def test_bad_calibration_data_leaves_no_output(tmp_path):
    from edgekit.firmware.deploy import deploy

    out = tmp_path / "out"
    with pytest.raises((CalibrationDataError, UserError, EdgekitError)):
        deploy(str(DEMO_MODEL), tmp_path / "missing-folder", out)
    assert not out.exists() and not list(tmp_path.glob(".out.partial-*"))


def test_deploy_to_real_hardware_is_refused_with_the_way_forward(tmp_path):
    from edgekit.firmware.deploy import DeployOptions, deploy

    with pytest.raises(UserError) as err:
        deploy(str(DEMO_MODEL), DIGITS / "calib", tmp_path / "out", DeployOptions(board="nucleo-l4r5zi"))
    assert "real hardware" in str(err.value) and "serial:PORT" in str(err.value)
    assert not (tmp_path / "out").exists()
