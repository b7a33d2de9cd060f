"""The MLPerf Tiny harness on the Cortex-M55 board (issue 27): mps3-an547 times m-lap-us with the SSE-300's
s32ktimer (the only CMSDK APB timer of the SSE-300 in QEMU's armsse.c: 0x4802f000 on the 32 kHz slow clock).
KWS in performance mode (5 windows, each at least --min-runtime by the device's own timestamps) and accuracy mode
(outputs bit-exact with LiteRT BUILTIN_REF)."""
from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import MLPERF

pytestmark = [pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                                 reason="qemu-system-arm or arm-none-eabi-gcc is not installed"),
              pytest.mark.slow]  # one harness build and two QEMU runs: ~60 s


def test_kws_harness_on_the_cortex_m55_board(tmp_path, cli):
    from edgekit.firmware.mlperf import generate_harness_firmware

    fw = tmp_path / "fw"
    generate_harness_firmware(MLPERF / "kws_ref_model_int8.tflite", "mps3-an547", fw, task="kws", build=True)
    app = json.loads((fw / "firmware.json").read_text())["app"]
    assert app["timer_source"].startswith("CMSDK APB timer at 0x4802F000 (32 kHz, 31.25 us per tick)")
    device = ["--device", "qemu:mps3-an547", "--harness", "mlperf-tiny"]
    assert cli("run", fw, *device, "--mode", "performance", "--min-runtime", "0.5", "-o", tmp_path / "perf") == 0
    perf = json.loads((tmp_path / "perf" / "run.json").read_text())
    assert len(perf["windows"]) == 5 and all(w["runtime_s"] >= 0.5 for w in perf["windows"])
    assert perf["summary"]["median_throughput_inf_per_s"] > 0 and perf["dut"]["model"] == "kws01"
    assert cli("mlperf-dataset", fw, "--task", "kws", "-n", "3", "-o", tmp_path / "ds") == 0
    assert cli("run", fw, *device, "--mode", "accuracy", "--dataset", tmp_path / "ds", "-o", tmp_path / "acc") == 0
    acc = json.loads((tmp_path / "acc" / "run.json").read_text())
    assert acc["outputs_bit_exact"]["value"] is True and acc["outputs_bit_exact"]["differing_elements"] == 0
    # the device agrees with the host model on every file labelled by prediction (the dataset holds every class;
    # classes random inputs never reach are labelled by assignment, see edgekit/run/mlperf/dataset.py)
    files = acc["files"]
    assert {f["label"] for f in files} == set(range(12))
    assert acc["summary"]["top1"] == pytest.approx(sum(f["predicted"] == f["label"] for f in files) / len(files))
