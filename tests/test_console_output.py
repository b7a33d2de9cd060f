"""Console output is for people: every command ends with its key figures in short lines (<= 120 characters); long
provenance (power and cycle model sources) is in run.json / report.md, which the console names."""
import json
import shutil

import numpy as np
import pytest

from tests.conftest import MLPERF

KWS_FLOAT = MLPERF / "kws_ref_model_float32.tflite"
KWS_INT8 = MLPERF / "kws_ref_model_int8.tflite"
AD_INT8 = MLPERF / "ad_autoencoder_int8.tflite"
MAX = 120


def console(cli, capsys, *args, codes=(0,)) -> str:
    code = cli(*args)
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert code in codes, text
    long = [line for line in text.splitlines() if len(line) > MAX]
    assert not long, f"{len(long)} console line(s) over {MAX} characters: {long[:2]}"
    return text


@pytest.mark.skipif(not (shutil.which("qemu-system-arm") and shutil.which("arm-none-eabi-gcc")),
                    reason="qemu-system-arm and arm-none-eabi-gcc are needed")
def test_qemu_run_summary_shows_instructions_bit_exactness_and_estimates(cli, capsys, tmp_path):
    text = console(cli, capsys, "run", AD_INT8, "--device", "qemu:mps2-an386", "-n", "2", "-o", tmp_path / "run")
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert f"instructions: {run['instructions_per_inference']:,} per inference (exact, QEMU plugin" in text
    assert "outputs: bit-exact vs LiteRT OpResolverType.BUILTIN_REF" in text
    assert "ms per inference (estimated:" in text and "MHz; not measured)" in text
    assert "uJ per inference (estimated; source in run.json and report.md)" in text
    assert "power_model" in run["energy_uj_per_inference"]["source"]  # the long provenance is kept, in run.json
    assert "memory: arena" in text and "run.json, report.md" in text


def test_host_run_firmware_parity_verify_devices(cli, capsys, tmp_path):
    text = console(cli, capsys, "run", KWS_INT8, "--device", "host", "-n", "5", "--warmup", "1", "-o", tmp_path / "run")
    assert "latency over 5 warm iterations: p50" in text and "cold start: load" in text and "energy:" in text

    text = console(cli, capsys, "firmware", KWS_INT8, "-o", tmp_path / "fw")
    assert "operators: " in text and "flash: " in text and "ram: " in text and "arena: " in text
    assert "firmware.json" in text

    data = tmp_path / "x.npy"
    np.save(data, np.random.default_rng(0).normal(0, 1, (6, 49, 10, 1)).astype(np.float32))
    text = console(cli, capsys, "parity", KWS_INT8, KWS_INT8, "--data", data, "-o", tmp_path / "p")
    assert "cosine=1.0000" in text and "parity PASSED on 6 samples" in text
    assert "wrote " in text and "parity.json, report.md, report.html, manifest.json" in " ".join(text.split())  # wrapped

    text = console(cli, capsys, "verify", tmp_path / "p")
    assert "verify: all 2 artifact(s)" in text or "verify: all" in text

    console(cli, capsys, "devices")


def test_quantize_summary(cli, capsys, tmp_path):
    calib = tmp_path / "calib.npy"
    np.save(calib, np.random.default_rng(0).normal(0, 1, (20, 49, 10, 1)).astype(np.float32))
    text = console(cli, capsys, "quantize", KWS_FLOAT, "--calib", calib, "-o", tmp_path / "q", codes=(0, 1))
    assert "cosine=" in text and "sqnr_db=" in text and ("parity PASSED" in text or "parity FAILED" in text)
    assert "manifest.json" in text


PHOTOS_SPEC = {"name": "console", "color": "rgb", "shorter_side": 72, "crop": [64, 64], "resize": "bilinear",
               "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225], "layout": "NCHW"}


def test_compile_summary(cli, capsys, tmp_path):
    pytest.importorskip("ethosu.vela")
    text = console(cli, capsys, "compile", KWS_INT8, "-o", tmp_path / "npu")
    assert "compiled for ethos-u55-128" in text and "ms per inference (estimated by Vela, not measured)" in text
    assert "MACs: " in text and "memory: SRAM" in text and "placement: every operator on the NPU" in text
    assert "compile.json, report.md" in text  # where the configuration and method of every figure are


def test_preprocess_parity_summary_names_unreadable_files_briefly(cli, capsys, tmp_path):
    from tests.preprocessing.edge_cases import PHOTOS

    images = tmp_path / "images"
    shutil.copytree(PHOTOS, images)
    for i in range(8):  # more unreadable files than the console names
        (images / f"broken_{i}.jpg").write_bytes(b"not a jpeg")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(PHOTOS_SPEC))
    text = console(cli, capsys, "preprocess-parity", "--reference", spec, "--candidate", f"opencv:{spec}", "--images", images,
                   "--allow-unreadable", "8", "-o", tmp_path / "pp", codes=(0, 1))
    assert "3 of 11 images compared: max_abs=" in text and "psnr_db=" in text
    for i in range(8):  # every unreadable file named, with each pipeline's reason, in short lines
        assert f"broken_{i}.jpg: reference could not process it: " in text
        assert f"broken_{i}.jpg: candidate could not process it: " in text
    assert "parity.json, report.md" in text


def test_calib_check_summary(cli, capsys, tmp_path, demo_float_tflite):
    from tests.conftest import DIGITS

    text = console(cli, capsys, "calib-check", "--model", demo_float_tflite, "--calib", DIGITS / "calib", "--live",
                   DIGITS / "eval", "--limit", "40", "-o", tmp_path / "cc", codes=(0, 1))
    assert "calib-check: " in text and "worst tensors: " in text and "clipped" in text
    assert "calib_check.json, report.md" in text


def test_long_steps_report_progress_through_the_cli_display(cli, capsys, tmp_path):
    """Library steps over ~2 s (Vela, firmware build, QEMU boot) report to the CLI's progress display."""
    from edgekit.progress import reporting_to, step_progress

    assert step_progress("nothing listens", 3)(1) is None  # outside the CLI: a no-op
    events = []

    def factory(label, total):
        events.append((label, total))
        return lambda n: events.append((label, n))

    with reporting_to(factory):
        console(cli, capsys, "compile", KWS_INT8, "-o", tmp_path / "npu")
    assert ("Vela", 1) in events
