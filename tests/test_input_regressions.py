"""Regression tests of issue 13 (items 3-6) that are not a refusal: the bad-input refusals are in
tests/test_bad_input_table.py."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from edgekit.atomic import atomic_output_dir
from tests.conftest import DIGITS, MLPERF


# --- 4. an output folder is replaced as a whole, never mixed ----------------------------------------------
def test_a_new_run_replaces_an_edgekit_folder_as_a_whole(tmp_path):
    out = tmp_path / "out"
    with atomic_output_dir(out) as stage:
        (stage / "manifest.json").write_text("{}")
        (stage / "layers.json").write_text("[]")
        (stage / "sub").mkdir()
    with atomic_output_dir(out) as stage:
        (stage / "manifest.json").write_text('{"second": true}')
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json"]
    assert json.loads((out / "manifest.json").read_text()) == {"second": True}
    assert [p.name for p in tmp_path.iterdir()] == ["out"], "staging or old folders were left behind"


def test_a_failed_run_keeps_the_previous_result(tmp_path):
    out = tmp_path / "out"
    with atomic_output_dir(out) as stage:
        (stage / "run.json").write_text("{}")
    with pytest.raises(RuntimeError), atomic_output_dir(out) as stage:
        (stage / "half.bin").write_bytes(b"x")
        raise RuntimeError("interrupted")
    assert [p.name for p in out.iterdir()] == ["run.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_quantize_debug_then_mse_into_the_same_folder_leaves_no_layer_files(cli, capsys, tmp_path, digits_arrays,
                                                                            demo_float_tflite):
    calib = tmp_path / "calib.npy"
    np.save(calib, digits_arrays[0][:40])
    out = tmp_path / "out"
    assert cli("quantize", demo_float_tflite, "--calib", calib, "--debug", "-o", out) == 0, capsys.readouterr().err
    assert (out / "layers.json").is_file()
    assert cli("quantize", demo_float_tflite, "--calib", calib, "--method", "mse", "-o", out) == 0, capsys.readouterr().err
    listed = {Path(a["path"]).name for a in json.loads((out / "manifest.json").read_text())["artifacts"]}
    present = {p.name for p in out.iterdir()}
    assert not [n for n in present if n.startswith("layers.")]
    assert present - {"manifest.json"} <= listed, f"files not in manifest.json: {present - listed - {'manifest.json'}}"


# --- 3. class names in labels.csv map through the folder's class list -----------------------------------------
def test_labels_csv_class_names_map_through_classes_txt(tmp_path):
    from edgekit.calibration.dataset import ImageFolderSource
    from edgekit.preprocessing.spec import find_spec

    folder = tmp_path / "imgs"
    folder.mkdir()
    names = [line.split(",")[0] for line in (DIGITS / "calib" / "labels.csv").read_text().splitlines()[1:5]]
    for n in names:
        shutil.copy(DIGITS / "calib" / n, folder / n)
    classes = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
    (folder / "classes.txt").write_text("\n".join(classes) + "\n")
    (folder / "labels.csv").write_text(f"file,label\n{names[0]},one\n{names[1]},7\n{names[2]},nine\n{names[3]}, two \n")
    source = ImageFolderSource(folder, find_spec(DIGITS / "calib"))
    assert source.labels == [1, 7, 9, 2]


# --- 5. a dynamic-batch ONNX model on the default (TFLite) format --------------------------------------------
@pytest.fixture(scope="module")
def dynamic_onnx(tmp_path_factory):
    """A tiny CNN exported with a dynamic batch, height and width (N, 3, H, W)."""
    import torch

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.fc = torch.nn.Linear(4, 10)

        def forward(self, x):
            return self.fc(torch.relu(self.conv(x)).mean(dim=(2, 3)))

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("dyn")
    path = folder / "dyn.onnx"
    torch.onnx.export(Tiny().eval(), torch.zeros(1, 3, 16, 16), str(path), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "N", 2: "H", 3: "W"}, "y": {0: "N"}}, dynamo=False, opset_version=17)
    np.save(folder / "calib.npy", np.random.default_rng(0).random((20, 3, 16, 16)).astype(np.float32))
    return path, folder / "calib.npy"


@pytest.mark.slow
def test_dynamic_onnx_quantizes_to_tflite_with_input_shape(cli, capsys, tmp_path, dynamic_onnx):
    model, calib = dynamic_onnx
    code = cli("quantize", model, "--calib", calib, "--input-shape", "1,3,16,16", "-o", tmp_path / "out")
    err = capsys.readouterr().err
    assert code == 0, err
    float_inputs = json.loads((tmp_path / "out" / "parity.json").read_text())["reference"]
    assert "16, 16" in json.dumps(float_inputs) or (tmp_path / "out" / "model_int8.tflite").is_file()


def test_dynamic_onnx_without_input_shape_names_the_dimension(cli, capsys, tmp_path, dynamic_onnx):
    model, calib = dynamic_onnx
    assert cli("quantize", model, "--calib", calib, "-o", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert "input 'x' has a dynamic dimension 2 (H)" in err and "--input-shape" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_tool_messages_lose_colour_codes_and_get_our_fix():
    from edgekit.tool_messages import ONNX2TF, strip_ansi, summarize, translate

    line = ("\x1b[31mERROR:\x1b[0m The trial run of the model failed: input shape [None, 3, 224, 224] is undefined. "
            "Use the \x1b[32m-b\x1b[0m option or \x1b[32m-ois\x1b[0m overwrite_input_shape. " + "x" * 400)
    assert "\x1b" not in strip_ansi(line)
    known = translate([line], ONNX2TF)
    assert known is not None and "--input-shape" in known.fix and "-ois" not in known.fix
    short = summarize([line, "", "\x1b[33mlast\x1b[0m"])
    assert "\x1b" not in short and all(len(row) <= 110 for row in short.splitlines())


# --- parity of a dynamic-batch reference with a batch-1 candidate (bench_mlperf_quantize's crash) -------------
def test_parity_accepts_a_dynamic_batch_against_batch_one(tmp_path):
    from tensorflow.lite.tools import flatbuffer_utils as fb

    from edgekit.parity.compare import compare
    from edgekit.parity.runners import open_runner
    from edgekit.parity.tolerance import Tolerance

    reference = MLPERF / "ic_resnet8_float32.tflite"
    model = fb.read_model(str(reference))
    for tensor in model.subgraphs[0].tensors:
        if tensor.shapeSignature is not None and len(tensor.shapeSignature) and tensor.shapeSignature[0] == -1:
            tensor.shapeSignature[0] = 1
    static = tmp_path / "ic_batch1.tflite"
    fb.write_model(model, str(static))
    ref, cand = open_runner(reference), open_runner(static)
    assert ref.input_specs()[0].shape[0] == -1 and cand.input_specs()[0].shape[0] == 1
    samples = [[np.random.default_rng(i).random((1, 32, 32, 3)).astype(np.float32)] for i in range(3)]
    report = compare(ref, cand, samples, tolerance=Tolerance(min_cosine=0.9999))
    assert report.passed and report.outputs[0].cosine > 0.9999


# --- 6. preprocess-parity passes with unreadable files only when --allow-unreadable says so ------------------
def test_preprocess_parity_allow_unreadable_passes_and_still_names_the_file(cli, capsys, tmp_path):
    folder = tmp_path / "imgs"
    folder.mkdir()
    for line in (DIGITS / "calib" / "labels.csv").read_text().splitlines()[1:4]:
        shutil.copy(DIGITS / "calib" / line.split(",")[0], folder)
    (folder / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    spec = DIGITS / "calib" / "preprocess.json"
    argv = ("preprocess-parity", "--reference", spec, "--candidate", spec, "--images", folder, "--no-diagnose")
    assert cli(*argv, "--allow-unreadable", "1") == 0
    captured = capsys.readouterr()
    assert "broken.png" in captured.err
    assert cli(*argv) == 1
    assert "1 image(s) could not be read by either pipeline: broken.png" in capsys.readouterr().err
