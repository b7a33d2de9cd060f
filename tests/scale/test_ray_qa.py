"""`calib-check --live ... --ray` and `preprocess-parity --images ... --ray` on a local Ray (2 CPUs), tiny data.

Both merge per-chunk statistics: 1 and 2 workers (different chunkings) give the single-process result —
identical verdict/pass-fail and counts, float metrics within 1e-9 relative; corrupt samples are counted
and named."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from edgekit.scale.ray_parity import RaySettings
from tests.conftest import DIGITS

pytest.importorskip("ray", reason="ray is pinned in requirements.lock (make install)")
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("local_ray")]  # one local Ray (2 CPUs) for the module

REL = 1e-9


@pytest.fixture(scope="module")
def calib_arrays(tmp_path_factory, digits_arrays):
    """The committed calibration digits, dark ones (unrepresentative), and 120 live digits with labels where
    row 7 holds a NaN (corrupt)."""
    calib, evaluation, labels = digits_arrays
    folder = tmp_path_factory.mktemp("ray-calib")
    np.save(folder / "calib.npy", calib)
    np.save(folder / "dark.npy", calib * np.float32(0.25))
    live = evaluation[:120].copy()
    live[7].flat[0] = np.nan
    np.savez(folder / "live.npz", x=live, labels=labels[:120])
    return folder


def _close(a, b, where=""):
    if isinstance(a, dict):
        assert set(a) == set(b), where
        for k in a:
            _close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, float) and not (math.isnan(a) and math.isnan(b)):
        assert a == b or math.isclose(a, b, rel_tol=REL, abs_tol=0.0), (where, a, b)
    else:
        assert a == b, (where, a, b)


def _same_calib_check(ray_report, local):
    assert ray_report.verdict == local.verdict and ray_report.reasons == local.reasons
    assert ray_report.live["samples"] == local.live["samples"] and ray_report.live["skipped"] == local.live["skipped"]
    for a, b in zip(ray_report.tensors, local.tensors):
        assert a["name"] == b["name"]
        for key in ("clipped", "clipped_below", "clipped_above", "live_min", "live_max", "range"):  # from exact counts
            assert a[key] == b[key], (a["name"], key)
        _close(a, b, a["name"])
    for a, b in zip(ray_report.inputs, local.inputs):
        assert a["ks"] == b["ks"]  # integer bin counts
        _close(a, b, f"input channel {a['channel']}")


def test_calib_check_on_ray_equals_one_process_for_1_and_2_workers(calib_arrays, demo_float_tflite):
    from edgekit.preprocessing.calib_check import calib_check

    args = (str(demo_float_tflite), calib_arrays / "dark.npy", calib_arrays / "live.npz")
    local = calib_check(*args)
    one = calib_check(*args, scale=RaySettings(workers=1), chunk=200)
    two = calib_check(*args, scale=RaySettings(workers=2), chunk=17)
    assert local.verdict == "unrepresentative" and local.live["samples"] == 119 and local.live["skipped"] == 1
    for report in (one, two):
        _same_calib_check(report, local)
        assert report.errors["live"] == [f"{calib_arrays / 'live.npz'}[7]: contains NaN or Inf"]
    assert one.execution["engine"] == "ray (local)" and one.execution["workers"] == 1
    assert two.execution["workers"] == 2 and two.execution["samples"] == 119 and two.execution["samples_per_s"] > 0
    assert two.live["dataset"]["chunks"] == 8 and local.execution["engine"] == "in-process"


def test_calib_check_effect_on_ray_cli(cli, capsys, tmp_path, calib_arrays, demo_float_tflite):
    """--effect: pass-2 histograms and both int8 models' parity on Ray equal the in-process run."""
    from edgekit.preprocessing.calib_check import calib_check

    local = calib_check(str(demo_float_tflite), calib_arrays / "calib.npy", calib_arrays / "live.npz", effect=True)
    out = tmp_path / "cc"
    code = cli("calib-check", "--model", demo_float_tflite, "--calib", calib_arrays / "calib.npy", "--live",
               calib_arrays / "live.npz", "--effect", "--ray", "--workers", "2", "--chunk", "25", "-o", out)
    printed = capsys.readouterr()
    assert code == (0 if local.passed else 1), printed.err
    assert "ran on ray (local), 2 worker(s): 119 live samples" in printed.out and "live.npz[7]" in printed.err
    data = json.loads((out / "calib_check.json").read_text())
    assert data["verdict"] == local.verdict and data["execution"]["workers"] == 2
    for key in ("with_calibration_set", "with_live_data"):
        a, b = data["effect"][key], local.effect[key]
        assert a["sha256"] == b["sha256"]  # the same live histograms -> the same ranges -> the same int8 model
        assert a["accuracy"]["candidate_top1"] == b["accuracy"]["candidate_top1"]
        for x, y in zip(a["outputs"], b["outputs"]):
            for metric in ("cosine", "sqnr_db", "rmse", "mae", "max_abs", "top1_agreement"):
                assert math.isclose(x[metric], y[metric], rel_tol=REL), (key, metric)
    assert "ray (local) with 2 worker(s)" in (out / "report.md").read_text()


@pytest.fixture(scope="module")
def skew(tmp_path_factory):
    """60 rendered color digits (labels.csv), the RGB demo model, the training and app specs; one corrupt PNG."""
    from edgekit.preprocessing.demo import write_demo

    demo = write_demo(tmp_path_factory.mktemp("ray-skew") / "demo", limit=60)
    (demo / "images" / "zz_broken.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    return demo


def _same_preprocess_parity(ray_report: dict, local: dict):
    assert ray_report["passed"] == local["passed"] and ray_report["failures"] == local["failures"]
    _close(ray_report["aggregate"], local["aggregate"], "aggregate")
    m, n = ray_report["model"], local["model"]
    for key in ("images", "flipped", "flip_rate", "top1_agreement", "accuracy"):  # counts: exactly equal
        assert m[key] == n[key], key
    for a, b in zip(m["outputs"], n["outputs"]):
        for key in ("cosine", "sqnr_db", "rmse", "mae", "rel_l2", "max_abs", "top1_agreement"):
            assert math.isclose(a[key], b[key], rel_tol=REL, abs_tol=0.0), (key, a[key], b[key])


def test_preprocess_parity_on_ray_equals_one_process_for_1_and_2_workers(cli, capsys, tmp_path, skew):
    from edgekit.preprocessing.parity import open_model, read_labels, run_parity
    from edgekit.preprocessing.sources import list_images, open_pipeline
    from edgekit.scale.ray_preprocess import preprocess_parity_on_ray

    images, labels = list_images(skew / "images"), read_labels(skew / "images")
    reference, candidate = str(skew / "reference.json"), f"opencv:{skew / 'app.json'}"
    runner = open_model(skew / "model.tflite")
    local, _, _ = run_parity(open_pipeline(reference), open_pipeline(candidate), images, model=runner, labels=labels,
                             diagnose=False)
    local = local.to_json()
    assert not local["passed"] and local["aggregate"]["status_counts"]["both_error"] == 1 and local["model"]["images"] == 60

    one, ref, cand, listed = preprocess_parity_on_ray(reference, candidate, images, model_path=skew / "model.tflite",
                                                      runner=runner, labels=labels, diagnose=False,
                                                      settings=RaySettings(workers=1), chunk=100)
    _same_preprocess_parity(one.to_json(), local)
    assert len(one.images) == 21 and len(ref) == len(cand) == len(listed) == 21  # the broken file + the 20 worst
    assert one.images[-1].name == "zz_broken.png" and one.images[-1].status == "both_error"

    out = tmp_path / "pp"
    code = cli("preprocess-parity", "--reference", reference, "--candidate", candidate, "--images", skew / "images",
               "--model", skew / "model.tflite", "--ray", "--workers", "2", "--chunk", "7", "-o", out)
    printed = capsys.readouterr()
    assert code == 1
    assert "ran on ray (local), 2 worker(s): 61 images" in printed.out and "zz_broken.png" in printed.err
    two = json.loads((out / "parity.json").read_text())
    _same_preprocess_parity(two, local)
    assert two["execution"]["workers"] == 2 and two["execution"]["samples_per_s"] > 0
    assert [d["name"] for d in two["images"]] == [d.name for d in one.images]
    assert two["model"]["flipped_images"] == one.to_json()["model"]["flipped_images"]
    assert two["diagnosis"]["available"] and "channel order" in {c["family"] for c in two["diagnosis"]["causes"]}
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "parity.json", "report.md", "worst_diff.png"]
    assert "worker(s)" in (out / "report.md").read_text()


def test_unreachable_cluster_fails_fast_for_both_commands(cli, capsys, tmp_path, calib_arrays, demo_float_tflite):
    assert cli("calib-check", "--model", demo_float_tflite, "--calib", calib_arrays / "calib.npy", "--live",
               calib_arrays / "live.npz", "--ray-address", "127.0.0.1:9", "-o", tmp_path / "a") == 2
    assert "cannot reach the Ray cluster at 127.0.0.1:9" in capsys.readouterr().err and not (tmp_path / "a").exists()
    assert cli("preprocess-parity", "--reference", DIGITS / "calib" / "preprocess.json", "--candidate",
               f"opencv:{DIGITS / 'calib' / 'preprocess.json'}", "--images", DIGITS / "calib", "--ray-address",
               "127.0.0.1:9") == 2
    assert "cannot reach the Ray cluster at 127.0.0.1:9" in capsys.readouterr().err
