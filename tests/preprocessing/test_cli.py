"""`edgekit preprocess-parity` end to end: exit codes, reports written atomically, every kind of
reference/candidate (spec, IMPL:spec, Python callable, tensor folder), unreadable files named."""
import json
import shutil

import numpy as np
import pytest

from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.preprocessing.base import implementation
from tests.preprocessing.edge_cases import CORRUPT, PHOTOS

SPEC = {"name": "cli", "color": "rgb", "shorter_side": 72, "crop": [64, 64], "resize": "bilinear",
        "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225], "layout": "NCHW"}
APP_MODULE = '''
import numpy as np
from PIL import Image

def preprocess(path):
    """The app's serving code: same spec, but OpenCV-style BGR (a bug)."""
    image = Image.open(path).convert("RGB")
    w, h = image.size
    scale = 72 / min(w, h)
    image = image.resize((int(72 * w / h) if w > h else 72, 72 if w > h else int(72 * h / w)), Image.Resampling.BILINEAR)
    w, h = image.size
    top, left = int(round((h - 64) / 2.0)), int(round((w - 64) / 2.0))
    x = np.asarray(image.crop((left, top, left + 64, top + 64)), np.float32)[:, :, ::-1] / 255.0
    x = (x - np.array([0.485, 0.456, 0.406], np.float32)) / np.array([0.229, 0.224, 0.225], np.float32)
    return x.transpose(2, 0, 1)[None]

def broken(path):
    raise RuntimeError("model server down")
'''


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(SPEC))
    return path


def test_generated_c_matches_the_reference_on_mixed_images_and_unreadable_files_are_counted(cli, capsys, tmp_path, spec_file, mixed_dir):
    out = tmp_path / "report"
    code = cli("preprocess-parity", "--reference", spec_file, "--candidate", f"c:{spec_file}", "--images", mixed_dir, "-o", out,
               "--allow-unreadable", len(CORRUPT))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "parity.json", "report.md"]  # identical: no PNG
    report = json.loads((out / "parity.json").read_text())
    agg = report["aggregate"]
    assert agg["status_counts"] == {"compared": len(list(mixed_dir.iterdir())) - len(CORRUPT), "both_error": len(CORRUPT)}
    assert agg["max_abs"] == 0 and agg["psnr_db"] == "inf"
    for name in CORRUPT:  # each unreadable file is named, with the reason, on stderr and in the report
        assert name in captured.err
    bad = {i["name"]: i for i in report["images"] if i["status"] == "both_error"}
    assert set(bad) == set(CORRUPT) and "truncated" in bad["truncated.jpg"]["errors"]["reference"]
    assert report["provenance"]["tools"]["pillow"] and report["provenance"]["images"]["count"] == len(list(mixed_dir.iterdir()))
    assert "## Files that could not be processed" in (out / "report.md").read_text()


def test_python_callable_candidate_fails_and_the_cause_is_named(cli, capsys, tmp_path, spec_file):
    (tmp_path / "app_code").mkdir()
    (tmp_path / "app_code" / "serving.py").write_text(APP_MODULE)
    out = tmp_path / "report"
    code = cli("preprocess-parity", "--reference", spec_file, "--candidate", "serving:preprocess", "--python-path",
               tmp_path / "app_code", "--images", PHOTOS, "-o", out)
    captured = capsys.readouterr()
    assert code == 1
    assert "channel order: the candidate uses BGR, the reference RGB" in captured.out
    assert "mean_abs_lsb" in captured.err
    assert (out / "worst_diff.png").stat().st_size > 1000
    md = (out / "report.md").read_text()
    assert "**Verdict: FAILED**" in md and "| channel order | RGB | BGR |" in md


def test_callable_that_raises_is_reported_per_image(cli, capsys, tmp_path, spec_file):
    (tmp_path / "serving.py").write_text(APP_MODULE)
    code = cli("preprocess-parity", "--reference", spec_file, "--candidate", "serving:broken", "--python-path", tmp_path,
               "--images", PHOTOS, "--no-diagnose")
    captured = capsys.readouterr()
    assert code == 1
    assert "china.jpg: candidate could not process it: RuntimeError: model server down" in captured.err
    assert "the candidate failed on 3 image(s) the reference read" in captured.err


def test_tensor_folder_from_a_device(cli, capsys, tmp_path, spec_file):
    spec = PreprocessSpec.from_dict(SPEC)
    device = tmp_path / "device"
    device.mkdir()
    for path in sorted(PHOTOS.glob("*.jpg")):
        np.save(device / f"{path.stem}.npy", implementation("pillow", spec)(path)[None])  # with a batch dimension
    assert cli("preprocess-parity", "--reference", spec_file, "--candidate", device, "--images", PHOTOS) == 0
    (device / "flower.npy").unlink()
    assert cli("preprocess-parity", "--reference", spec_file, "--candidate", device, "--images", PHOTOS) == 1
    assert "flower.jpg: candidate could not process it: no tensor flower.npy" in capsys.readouterr().err


def test_thresholds_are_options(cli, capsys, spec_file):
    # OpenCV's INTER_AREA stands in for antialiased bilinear: a real difference, caught by default ...
    assert cli("preprocess-parity", "--reference", spec_file, "--candidate", f"opencv:{spec_file}", "--images", PHOTOS,
               "--no-diagnose") == 1
    # ... and accepted when QA decides it is tolerable
    assert cli("preprocess-parity", "--reference", spec_file, "--candidate", f"opencv:{spec_file}", "--images", PHOTOS,
               "--max-mean-abs-lsb", "5", "--min-psnr-db", "30") == 0
    capsys.readouterr()


@pytest.mark.parametrize("args, message", [
    (["--candidate", "nosuchimpl:x.json"], "unknown implementation"),
    (["--candidate", "opencv:missing.json"], "cannot read preprocessing spec missing.json"),
    (["--candidate", "not a pipeline"], "is not a pipeline"),
    (["--candidate", "no_such_module_xyz:fn"], "cannot import module 'no_such_module_xyz'"),
    (["--candidate", "SPEC", "--max-flip-rate", "-1"], "must not be negative"),
    (["--candidate", "SPEC", "--images", "/nonexistent/images"], "do not exist"),
])
def test_bad_input_gives_one_message_exit_2_and_no_output(cli, capsys, tmp_path, spec_file, args, message):
    out = tmp_path / "out"
    args = [str(spec_file) if a == "SPEC" else a for a in args]
    images = [] if "--images" in args else ["--images", str(PHOTOS)]
    code = cli("preprocess-parity", "--reference", spec_file, *args, *images, "-o", out)
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".out.partial*"))


def test_a_failed_write_leaves_no_partial_report(cli, tmp_path, spec_file, monkeypatch):
    import edgekit.preprocessing.report as report

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(report, "worst_png", boom)
    out = tmp_path / "out"
    with pytest.raises(OSError):
        cli("preprocess-parity", "--reference", spec_file, "--candidate", f"opencv:{spec_file}", "--images", PHOTOS,
            "--no-diagnose", "-o", out)
    assert not out.exists() and not list(tmp_path.glob(".out.partial*"))


@pytest.mark.slow  # quantizes the demo model
def test_spec_input_quantization_from_the_model(cli, capsys, tmp_path):
    """dtype int8 + quantization: model takes the int8 model's input scale/zero-point; the C code then
    writes the int8 tensor the model reads, identical to the reference's."""
    from edgekit.quantize import quantize
    from tests.conftest import DEMO_MODEL, DIGITS

    result = quantize(str(DEMO_MODEL), DIGITS / "calib", tmp_path / "q")
    spec = tmp_path / "int8.json"
    spec.write_text(json.dumps({"name": "digits-int8", "color": "grayscale", "size": [8, 8], "layout": "NCHW",
                                "dtype": "int8", "quantization": "model"}))
    images = tmp_path / "images"
    images.mkdir()
    for path in sorted((DIGITS / "eval").glob("*.png"))[:60]:
        shutil.copy(path, images / path.name)
    model = result.outdir / "model_int8.tflite"
    code = cli("preprocess-parity", "--reference", spec, "--candidate", f"c:{spec}", "--images", images, "--model", model,
               "--max-flip-rate", "0")
    out = capsys.readouterr().out
    assert code == 0, out
    assert "flip rate 0.0000 (0 of 60)" in out
    # without the model the spec cannot be resolved: one clear error
    assert cli("preprocess-parity", "--reference", spec, "--candidate", f"c:{spec}", "--images", images) == 2
    assert "no model was given" in capsys.readouterr().err
