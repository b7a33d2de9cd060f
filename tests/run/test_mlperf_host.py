"""MLPerf Tiny host side without a device: AUC, the device's input conversion, results.txt form, dataset folders."""
import csv
import re

import numpy as np
import pytest

from edgekit.errors import UserError
from edgekit.firmware.mlperf import TASKS
from edgekit.run.mlperf import dataset as D
from edgekit.run.mlperf.harness import HarnessRun, results_text
from edgekit.run.mlperf.results import HarnessSummary, HarnessWindow
from tests.conftest import MLPERF


def test_device_input_conversion_follows_the_reference():
    """ad: round(x / scale) half away from zero + zero point, saturated; ic/vww: pixel - 128; kws: as sent."""
    ad = TASKS["ad"]
    x = np.array([0.5, -0.5, 1.5, 2.49, 1000.0, -1000.0, np.nan], dtype="<f4")
    assert D.device_input(ad, x.tobytes(), 1.0, 3).tolist() == [4, 2, 5, 5, 127, -128, 3]
    assert D.device_input(TASKS["ic"], bytes([0, 127, 128, 255]), 1 / 255, -128).tolist() == [-128, -1, 0, 127]
    assert D.device_input(TASKS["kws"], bytes([0x80, 0x7F]), 1.0, 0).tolist() == [-128, 127]


def test_ad_windows_follow_the_stride():
    entry = D.Entry("f", 2, 0, window=8, stride=4)
    assert D.windows(bytes(range(20)), entry) == [bytes(range(i, i + 8)) for i in (0, 4, 8, 12)]
    assert D.windows(b"abc", D.Entry("g", 12, 3)) == [b"abc"]


def _run(mode, task="kws"):
    run = HarnessRun(mode, TASKS[task], "qemu:mps2-an386", {"timer_source": "emulated time (test)"})  # type: ignore[typeddict-item]
    if mode == "performance":
        run.windows = [HarnessWindow(input=f"in{i}", iterations=40 + i, warmups=1, elapsed_us=10_500_000, runtime_s=10.5,
                                     throughput_inf_per_s=4.0 + i, latency_ms=10_500.0 / (40 + i), results=[0.5],
                                     meets_mlperf_runtime=True) for i in range(5)]
        run.summary = HarnessSummary(median_throughput_inf_per_s=6.0, min_runtime_s=10.0)
    else:
        run.summary = HarnessSummary(top1=0.902, auc=0.987) if task != "ad" else HarnessSummary(auc=0.861, top1=0.75)
    return run


def test_results_txt_has_the_runner_form():
    """The lines of the reference runner (benchmark/runner/script.py and main.py; more in
    tests/firmware/test_mlperf_runner_compat.py)."""
    text = results_text(_run("performance"))
    assert len(re.findall(r"^\d{4}\.\d{6} ulp-mlperf: Performance results for window \d:$", text, re.M)) == 5
    assert re.search(r"^\d{4}\.\d{6} ulp-mlperf:   # Inferences : +44$", text, re.M)
    assert re.search(r"^\d{4}\.\d{6} ulp-mlperf: Median throughput is +6\.000 inf\./sec\.$", text, re.M)
    assert "edgekit: timestamps: emulated time (test)" in text
    accuracy = results_text(_run("accuracy"))
    assert "ulp-mlperf: Top 1% = 90.2" in accuracy and "ulp-mlperf: AUC = 0.987" in accuracy
    ad = results_text(_run("accuracy", "ad"))
    assert "ulp-mlperf: AUC = 0.861" in ad


def test_generated_dataset_layout(tmp_path):
    model = (MLPERF / "kws_ref_model_int8.tflite").read_bytes()
    dataset = D.generate_dataset(model, "kws", tmp_path, count=3, seed=4)
    folder = tmp_path / "kws01"
    rows = list(csv.reader(open(folder / "y_labels.csv")))
    # -n 3 grows to one file per class: the reference runner's AUC needs every class
    assert len(rows) == 12 and all(len(r) == 3 and r[1] == "12" for r in rows)
    assert all((folder / r[0]).stat().st_size == 490 for r in rows)
    assert "host reference model's predictions" in (folder / "README.md").read_text()
    assert D.read_dataset(tmp_path, TASKS["kws"], input_bytes=490).entries == dataset.entries
    # the same seed gives the same folder
    again = D.generate_dataset(model, "kws", tmp_path / "again", count=3, seed=4)
    assert [(folder / e.file).read_bytes() for e in dataset.entries] == \
        [(tmp_path / "again" / "kws01" / e.file).read_bytes() for e in again.entries]


def test_generated_ad_dataset_has_windows(tmp_path):
    model = (MLPERF / "ad_autoencoder_int8.tflite").read_bytes()
    dataset = D.generate_dataset(model, "ad", tmp_path, count=4, frames=7)
    rows = list(csv.reader(open(tmp_path / "ad01" / "y_labels.csv")))
    assert all(r[1:] in (["2", "0", "2560", "512"], ["2", "1", "2560", "512"]) for r in rows)
    assert sorted(e.label for e in dataset.entries) == [0, 0, 1, 1]  # split at the median host error
    assert all((tmp_path / "ad01" / r[0]).stat().st_size == 7 * 128 * 4 for r in rows)


def test_dataset_problems_are_reported_at_once(tmp_path):
    folder = tmp_path / "kws01"
    folder.mkdir()
    (folder / "a.bin").write_bytes(bytes(490))
    (folder / "short.bin").write_bytes(bytes(10))
    (folder / "y_labels.csv").write_text("a.bin,12,3\nshort.bin,12,1\nmissing.bin,12,2\na.bin,12,99\nb.bin,x,1\n")
    with pytest.raises(UserError) as info:
        D.read_dataset(tmp_path, TASKS["kws"], input_bytes=490)
    message = info.value.message
    assert "5 problem(s)" not in message and "4 problem(s)" in message
    for part in ("short.bin has 10 bytes", "missing.bin does not exist", "class 99 outside", "line 5"):
        assert part in message
    with pytest.raises(UserError, match="no y_labels.csv"):
        D.read_dataset(tmp_path / "nothing", TASKS["kws"], input_bytes=490)
