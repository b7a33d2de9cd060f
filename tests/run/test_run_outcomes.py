"""Wrong outcomes on QEMU (issue 27): a run whose outputs are NOT bit-exact exits 1 (run.json written; exit 0 with
--allow-mismatch), and MLPerf Tiny harness firmware run without --harness is refused at once."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import MLPERF

needs_qemu = pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                                reason="qemu-system-arm or arm-none-eabi-gcc is not installed")
pytestmark = [needs_qemu, pytest.mark.slow]  # firmware builds + QEMU runs: ~50 s together


@pytest.fixture(scope="module")
def mismatched_firmware(tmp_path_factory) -> Path:
    """The AD firmware, whose model.tflite (the reference the run compares with) then has 256 weight bytes
    changed in the middle of the file: the device still runs the original model, so outputs differ."""
    from edgekit.cli import main

    out = tmp_path_factory.mktemp("mismatch") / "fw"
    assert main(["firmware", str(MLPERF / "ad_autoencoder_int8.tflite"), "--board", "mps2-an386", "--build",
                 "-o", str(out)]) == 0
    model = out / "model.tflite"
    blob = bytearray(model.read_bytes())
    middle = len(blob) // 2
    blob[middle:middle + 256] = bytes(b ^ 0x55 for b in blob[middle:middle + 256])
    model.write_bytes(bytes(blob))
    return out


def test_not_bit_exact_exits_1_and_keeps_the_report(mismatched_firmware, cli, capsys, tmp_path):
    out = tmp_path / "run"
    assert cli("run", mismatched_firmware, "--device", "qemu:mps2-an386", "-n", "2", "-o", out) == 1
    err = capsys.readouterr().err
    assert "the device's outputs are NOT bit-exact with LiteRT OpResolverType.BUILTIN_REF" in err
    assert "--allow-mismatch" in err and "Traceback" not in err
    exact = json.loads((out / "run.json").read_text())["work"]["outputs_bit_exact"]
    assert exact["value"] is False and exact["differing_elements"] > 0
    assert cli("run", mismatched_firmware, "--device", "qemu:mps2-an386", "-n", "2", "--allow-mismatch",
               "-o", tmp_path / "allowed") == 0


def test_harness_firmware_without_harness_is_refused_at_once(cli, capsys, tmp_path):
    from edgekit.firmware.mlperf import generate_harness_firmware

    fw = tmp_path / "fw"
    generate_harness_firmware(MLPERF / "ad_autoencoder_int8.tflite", "mps2-an386", fw, task="ad", build=True)
    assert cli("run", fw, "--device", "qemu:mps2-an386", "-n", "2", "-o", tmp_path / "run") == 2
    err = capsys.readouterr().err
    assert "is mlperf-tiny harness firmware (ad01): it answers the MLPerf Tiny runner's commands" in err, err
    assert "add --harness mlperf-tiny" in err and not (tmp_path / "run").exists()
