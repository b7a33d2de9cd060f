"""`edgekit calib-check` on a really unrepresentative calibration set (only dark digits) versus the
committed one, with live data = the held-out digits; and the accuracy effect of quantizing with each."""
import csv
import json
import shutil

import numpy as np
import pytest
from PIL import Image

from edgekit.preprocessing.calib_check import calib_check, ks_distance, wasserstein
from tests.conftest import DEMO_MODEL, DIGITS

DARK = 0.25  # every calibration pixel at a quarter of its brightness


@pytest.fixture(scope="module")
def arrays(tmp_path_factory, digits_arrays):
    calib, evaluation, labels = digits_arrays
    folder = tmp_path_factory.mktemp("calib-arrays")
    np.save(folder / "calib.npy", calib)
    np.save(folder / "dark.npy", calib * np.float32(DARK))
    np.savez(folder / "live.npz", x=evaluation, labels=labels)
    return folder


@pytest.fixture(scope="module")
def dark_images(tmp_path_factory):
    """The committed calibration PNGs at 1/4 brightness (same spec, same labels)."""
    folder = tmp_path_factory.mktemp("dark") / "calib"
    folder.mkdir()
    for path in sorted((DIGITS / "calib").glob("*.png")):
        pixels = np.asarray(Image.open(path), np.float64)
        Image.fromarray(np.floor(pixels * DARK + 0.5).astype(np.uint8)).save(folder / path.name)
    for name in ("labels.csv", "preprocess.json"):
        shutil.copy(DIGITS / "calib" / name, folder / name)
    return folder


def test_distances():
    rng = np.random.default_rng(0)
    a = rng.normal(0, 1, 5000)
    assert ks_distance(a, a) == 0 and wasserstein(a, a) == 0
    assert ks_distance(a, a + 5) > 0.95 and abs(wasserstein(a, a + 2) - 2) < 1e-9


def test_committed_calibration_set_is_representative(arrays, demo_float_tflite):
    report = calib_check(str(demo_float_tflite), arrays / "calib.npy", arrays / "live.npz")
    assert report.verdict == "representative", report.reasons
    worst = report.worst(1)[0]
    assert worst["clipped"] < 0.001
    assert report.inputs[0]["ks"] < 0.05
    assert report.calib["samples"] == 200 and report.live["samples"] == 400


def test_dark_calibration_set_is_unrepresentative_and_the_worst_tensors_are_named(arrays, demo_float_tflite):
    report = calib_check(str(demo_float_tflite), arrays / "dark.npy", arrays / "live.npz")
    assert report.verdict == "unrepresentative"
    worst = report.worst(3)
    assert worst[0]["clipped"] > 0.3  # 42 % of live input values lie above the dark range
    assert worst[0]["range"][1] == pytest.approx(DARK, rel=1e-6) and worst[0]["live_max"] == pytest.approx(1.0)
    assert any("fall outside its calibrated range" in r for r in report.reasons)
    assert any("KS" in r for r in report.reasons) and report.inputs[0]["ks"] > 0.25
    data = report.to_json()
    assert data["worst_tensors"][0] == worst[0]["name"]


def test_cli_writes_reports_and_gates(cli, capsys, tmp_path, arrays, demo_float_tflite):
    out = tmp_path / "cc"
    assert cli("calib-check", "--model", demo_float_tflite, "--calib", arrays / "dark.npy", "--live", arrays / "live.npz",
               "-o", out) == 1
    printed = capsys.readouterr().out
    assert "calib-check: UNREPRESENTATIVE" in printed and "worst tensors:" in printed
    assert sorted(p.name for p in out.iterdir()) == ["calib_check.json", "manifest.json", "ranges.png", "report.md"]
    data = json.loads((out / "calib_check.json").read_text())
    assert data["verdict"] == "unrepresentative" and data["model"]["sha256"] and data["provenance"]["tools"]
    assert "## Activation tensors, worst first" in (out / "report.md").read_text()
    assert cli("calib-check", "--model", demo_float_tflite, "--calib", arrays / "calib.npy", "--live", arrays / "live.npz") == 0
    # a looser limit turns the dark set's input KS into the only failing reason
    assert cli("calib-check", "--model", demo_float_tflite, "--calib", arrays / "dark.npy", "--live", arrays / "live.npz",
               "--max-clipped", "0.5", "--max-input-ks", "0.5") == 0


def test_unreadable_live_images_are_skipped_named_and_counted(cli, capsys, tmp_path, demo_float_tflite):
    live = tmp_path / "live"
    shutil.copytree(DIGITS / "eval", live)
    (live / "9999.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    with open(live / "labels.csv", "a", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerow(["9999.png", 0])
    out = tmp_path / "out"
    assert cli("calib-check", "--model", demo_float_tflite, "--calib", DIGITS / "calib", "--live", live, "-o", out) == 0
    err = capsys.readouterr().err
    assert "9999.png" in err
    data = json.loads((out / "calib_check.json").read_text())
    assert data["live"]["samples"] == 400 and data["live"]["skipped"] == 1


def test_bad_input_is_one_message(cli, capsys, tmp_path, demo_float_tflite):
    assert cli("calib-check", "--model", demo_float_tflite, "--calib", tmp_path / "none", "--live", DIGITS / "eval",
               "-o", tmp_path / "o") == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "o").exists()


@pytest.mark.slow  # quantizes the demo model three times
def test_dark_calibration_costs_accuracy_and_calib_check_shows_it(cli, capsys, tmp_path, dark_images):
    from edgekit.quantize import QuantizeOptions, quantize

    options = QuantizeOptions(eval_data=DIGITS / "eval")
    normal = quantize(str(DEMO_MODEL), DIGITS / "calib", tmp_path / "normal", options).parity.accuracy.to_dict()
    dark = quantize(str(DEMO_MODEL), dark_images, tmp_path / "dark", options).parity.accuracy.to_dict()
    print(flush=True)
    print(f"int8 accuracy on 400 eval digits: calibrated on normal images {normal['candidate_top1']:.4f}, "
          f"on dark images {dark['candidate_top1']:.4f} (float {normal['reference_top1']:.4f})", flush=True)
    assert normal["candidate_top1"] >= normal["reference_top1"] - 0.01
    assert dark["candidate_top1"] < normal["candidate_top1"] - 0.3

    out = tmp_path / "check"
    assert cli("calib-check", "--model", DEMO_MODEL, "--calib", dark_images, "--live", DIGITS / "eval", "--effect",
               "-o", out) == 1
    capsys.readouterr()
    effect = json.loads((out / "calib_check.json").read_text())["effect"]
    with_calib, with_live = effect["with_calibration_set"], effect["with_live_data"]
    print(f"calib-check --effect: int8 top-1 vs float {with_calib['outputs'][0]['top1_agreement']:.4f} (dark calibration) "
          f"vs {with_live['outputs'][0]['top1_agreement']:.4f} (calibrated on live data)")
    assert with_calib["accuracy"]["candidate_top1"] == pytest.approx(dark["candidate_top1"], abs=0.02)
    assert with_live["accuracy"]["candidate_top1"] > with_calib["accuracy"]["candidate_top1"] + 0.3
