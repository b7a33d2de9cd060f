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

    text = console(cli, capsys, "verify", tmp_path / "p")
    assert "verify: all 2 artifact(s)" in text or "verify: all" in text

    console(cli, capsys, "devices")


def test_quantize_summary(cli, capsys, tmp_path):
    calib = tmp_path / "calib.npy"
    np.save(calib, np.random.default_rng(0).normal(0, 1, (20, 49, 10, 1)).astype(np.float32))
    text = console(cli, capsys, "quantize", KWS_FLOAT, "--calib", calib, "-o", tmp_path / "q", codes=(0, 1))
    assert "cosine=" in text and "sqnr_db=" in text and ("parity PASSED" in text or "parity FAILED" in text)
    assert "manifest.json" in text
