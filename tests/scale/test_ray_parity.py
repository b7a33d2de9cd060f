"""Dataset-scale parity on Ray Data: one local Ray (2 CPUs) for the module, tiny data.

The merged statistics must give the single-process result: identical pass/fail, top-1 and accuracy
counts, float metrics within 1e-9 relative, whatever the worker count or chunking; corrupt samples are
counted and named; an unreachable cluster fails in seconds naming the address and the fix."""
from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

from edgekit.calibration import dataset as data
from edgekit.errors import UserError
from edgekit.parity.compare import compare
from edgekit.parity.runners import open_runner
from edgekit.parity.tolerance import Tolerance
from edgekit.scale.ray_parity import RaySettings, check_reachable, ray_parity
from edgekit.scale.sources import list_source
from tests.conftest import MLPERF

pytest.importorskip("ray", reason="ray is pinned in requirements.lock (make install)")
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("local_ray")]  # one local Ray (2 CPUs) for the module: ~1 min

KWS_FLOAT = MLPERF / "kws_ref_model_float32.tflite"
KWS_INT8 = MLPERF / "kws_ref_model_int8.tflite"
IC_FLOAT = MLPERF / "ic_resnet8_float32.tflite"
IC_INT8 = MLPERF / "ic_resnet8_int8.tflite"
TOL = Tolerance(min_cosine=0.9, min_top1=0.5)


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory):
    """Six random 32x32 RGB PNGs for IC ResNet-8 (+ preprocess.json) and one corrupt PNG; the spec as a dict."""
    from PIL import Image

    folder = tmp_path_factory.mktemp("images")
    spec = {"name": "ic-32", "color": "rgb", "size": [32, 32], "resize": "bilinear", "scale": 1.0,
            "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0], "layout": "NHWC", "dtype": "float32"}
    (folder / "preprocess.json").write_text(json.dumps(spec))
    rng = np.random.default_rng(3)
    for i in range(6):
        Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(folder / f"{i:02d}.png")
    (folder / "99.png").write_bytes(b"\x89PNG not really")
    return folder, spec


@pytest.fixture(scope="module")
def kws_npz(tmp_path_factory):
    """40 generated KWS inputs with labels; row 13 holds a NaN (corrupt)."""
    shape = open_runner(KWS_FLOAT).input_specs()[0].shape
    rng = np.random.default_rng(5)
    x = rng.normal(0, 20, (40, *shape[1:])).astype(np.float32)
    x[13, 0, 0] = np.nan
    path = tmp_path_factory.mktemp("kws") / "kws.npz"
    np.savez(path, x=x, labels=rng.integers(0, 12, 40))
    return path


def _single_process(path, skip=()):
    ref, cand = open_runner(KWS_FLOAT), open_runner(KWS_INT8)
    with np.load(path) as z:
        x, y = z["x"], z["labels"]
    keep = [i for i in range(len(x)) if i not in skip]
    return compare(ref, cand, [[x[i:i + 1]] for i in keep], tolerance=TOL, labels=[int(y[i]) for i in keep])


def _assert_same(ray_report, local_report):
    assert ray_report.passed == local_report.passed and ray_report.failures == local_report.failures
    assert ray_report.samples == local_report.samples
    for a, b in zip(ray_report.outputs, local_report.outputs):
        a, b = a.metrics(), b.metrics()
        assert set(a) == set(b)
        for key in ("cosine", "sqnr_db", "rmse", "mae", "rel_l2", "max_abs", "top1_agreement"):
            assert math.isclose(a[key], b[key], rel_tol=1e-9, abs_tol=0.0), (key, a[key], b[key])
        # top-1 agreement is a count over the same samples: exactly equal
        assert round(a["top1_agreement"] * ray_report.samples) == round(b["top1_agreement"] * local_report.samples)
    assert ray_report.accuracy.labels == local_report.accuracy.labels
    assert ray_report.accuracy.reference_top1 == local_report.accuracy.reference_top1
    assert ray_report.accuracy.candidate_top1 == local_report.accuracy.candidate_top1


def test_ray_parity_equals_single_process_for_any_worker_count(kws_npz, tmp_path, capsys):
    """1 worker through the API (one chunk), 2 workers through the CLI (chunks of 7): both equal compare()."""
    from edgekit.cli import main
    from edgekit.parity.compare import ParityReport

    local = _single_process(kws_npz, skip={13})
    inputs = open_runner(KWS_FLOAT).input_specs()
    one = ray_parity(KWS_FLOAT, KWS_INT8, list_source(kws_npz, inputs, chunk=40), settings=RaySettings(workers=1),
                     tolerance=TOL, top_k=5)
    _assert_same(one, local)

    out = tmp_path / "out"
    code = main(["parity", str(KWS_FLOAT), str(KWS_INT8), "--data", str(kws_npz), "--ray", "--workers", "2", "--chunk", "7",
                 "-o", str(out), "--min-cosine", "0.9", "--min-top1", "0.5"])
    printed = capsys.readouterr().out
    assert code == (0 if local.passed else 1)
    assert "ran on ray (local) with 2 worker(s)" in printed and "1 corrupt sample" in printed
    saved = json.loads((out / "parity.json").read_text())
    two = ParityReport.from_json(saved)
    _assert_same(two, local)
    assert two.data["dataset"]["chunks"] == 6
    assert one.data["corrupt"] == two.data["corrupt"] == {"count": 1, "samples": [f"{kws_npz}[13]: contains NaN or Inf"]}
    assert two.data["worst_samples"][:5] == one.data["worst_samples"] and len(one.data["worst_samples"]) == 5
    sqnrs = [w["sqnr_db"] for w in two.data["worst_samples"]]
    assert sqnrs == sorted(sqnrs)
    assert two.data["flips"][:5] == one.data["flips"][:5]
    assert two.data["execution"]["workers"] == 2 and two.data["execution"]["samples"] == 39
    assert two.data["execution"]["samples_per_s"] > 0
    assert one.candidate.kernels.startswith("LiteRT BUILTIN_WITHOUT_DEFAULT_DELEGATES")
    md = (out / "report.md").read_text()
    assert "## How it ran" in md and "Kernels: reference on LiteRT BUILTIN_WITHOUT_DEFAULT_DELEGATES" in md and "1 LSB" in md


def test_ray_parity_image_folder_with_a_corrupt_file(image_folder):
    """Images decoded through the spec on the workers; the corrupt file is counted and named."""
    folder, _ = image_folder
    inputs = open_runner(IC_FLOAT).input_specs()
    report = ray_parity(IC_FLOAT, IC_INT8, list_source(folder, inputs, chunk=4), settings=RaySettings(workers=2), tolerance=TOL)
    assert report.samples == 6 and report.data["corrupt"]["count"] == 1
    assert report.data["corrupt"]["samples"][0].startswith(str(folder / "99.png") + ": ")
    local = compare(open_runner(IC_FLOAT), open_runner(IC_INT8), data.whole(_good_only(folder)).samples(inputs), tolerance=TOL)
    for a, b in zip(report.outputs, local.outputs):
        assert math.isclose(a.cosine, b.cosine, rel_tol=1e-9) and a.top1_agreement == b.top1_agreement


def _good_only(folder):
    from edgekit.preprocessing.spec import PreprocessSpec

    source = data.ImageFolderSource(folder, PreprocessSpec.load(folder / "preprocess.json"))
    source.files = [f for f in source.files if f.name != "99.png"]
    return source


def test_unreachable_cluster_fails_in_seconds_naming_address_and_fix(capsys):
    t0 = time.perf_counter()
    with pytest.raises(UserError) as info:
        check_reachable("ray://127.0.0.1:9")  # discard port: nothing listens
    assert time.perf_counter() - t0 < 6
    assert "ray://127.0.0.1:9" in str(info.value) and "ray start --head" in info.value.fix

    from edgekit.cli import main

    code = main(["parity", str(KWS_FLOAT), str(KWS_INT8), "--data", "unused.npy", "--ray-address", "127.0.0.1:9"])
    err = capsys.readouterr().err
    assert code != 0 and "127.0.0.1:9" in err and "--ray" in err


def test_ray_flags_refused_when_contradictory(kws_npz, capsys):
    from edgekit.cli import main

    base = ["parity", str(KWS_FLOAT), str(KWS_INT8), "--data", str(kws_npz)]
    assert main(base + ["--workers", "2"]) != 0 and "--workers applies to Ray runs only" in capsys.readouterr().err
    assert main(base + ["--ray", "--ray-address", "auto"]) != 0 and "give one" in capsys.readouterr().err


def test_quantize_eval_data_on_ray(kws_npz, tmp_path, capsys):
    """`edgekit quantize --eval-data DATA --ray`: calibration here, parity of the written models on Ray."""
    from edgekit.cli import main

    with np.load(kws_npz) as z:
        np.save(tmp_path / "calib.npy", np.nan_to_num(z["x"][:16]))
    out = tmp_path / "q"
    code = main(["quantize", str(KWS_FLOAT), "--calib", str(tmp_path / "calib.npy"), "--eval-data", str(kws_npz),
                 "--ray", "--workers", "1", "-o", str(out), "--min-cosine", "0.5", "--min-top1", "0.1"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    report = json.loads((out / "parity.json").read_text())
    assert report["samples"] == 39 and report["data"]["execution"]["engine"] == "ray (local)"
    assert report["data"]["corrupt"]["count"] == 1 and report["data"]["calibration"]["selected"] == 16
    assert report["candidate"]["kernels"].startswith("LiteRT BUILTIN_WITHOUT_DEFAULT_DELEGATES")
    assert "## How it ran" in (out / "report.md").read_text()
    assert main(["quantize", str(KWS_FLOAT), "--calib", str(tmp_path / "calib.npy"), "--ray", "-o", str(tmp_path / "r")]) != 0
    assert "--ray needs --eval-data" in capsys.readouterr().err and not (tmp_path / "r").exists()
