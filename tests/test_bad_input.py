"""Bad input: one clear message, a non-zero exit, and no output files."""
import shutil

import numpy as np
import pytest

from tests.conftest import DEMO_MODEL, DIGITS


def quantize_fails(cli, capsys, tmp_path, model, calib, *extra):
    out = tmp_path / "out"
    code = cli("quantize", model, "--calib", calib, "-o", out, *extra)
    err = capsys.readouterr().err
    assert code == 2, err
    assert not out.exists(), "a failed run must not leave an output folder"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.partial")]
    assert "Traceback" not in err
    return err


@pytest.fixture
def calib_npy(tmp_path, digits_arrays):
    path = tmp_path / "calib.npy"
    np.save(path, digits_arrays[0][:40])
    return path


def test_truncated_tflite(cli, capsys, tmp_path, demo_float_tflite, calib_npy):
    bad = tmp_path / "cut.tflite"
    bad.write_bytes(demo_float_tflite.read_bytes()[:3000])
    err = quantize_fails(cli, capsys, tmp_path, bad, calib_npy)
    assert "cut.tflite" in err and ("corrupt" in err or "cannot be loaded" in err or "truncated" in err)


def test_non_model_file(cli, capsys, tmp_path, calib_npy):
    bad = tmp_path / "notes.onnx"
    bad.write_text("this is not a model\n" * 20)
    err = quantize_fails(cli, capsys, tmp_path, bad, calib_npy)
    assert "notes.onnx" in err and "not a valid ONNX model" in err


def test_pickle_is_refused_not_unpickled(cli, capsys, tmp_path, calib_npy):
    import torch

    from edgekit.demo.digits_model import digits_cnn

    path = tmp_path / "model.pt"
    torch.save(digits_cnn(), path)  # a full pickle: loading it would run arbitrary code
    err = quantize_fails(cli, capsys, tmp_path, path, calib_npy)
    assert "unpickle" in err and "torch.export.save" in err


def test_calibration_shape_mismatch_names_both_shapes(cli, capsys, tmp_path):
    calib = tmp_path / "wrong.npy"
    np.save(calib, np.zeros((10, 1, 9, 9), np.float32))
    err = quantize_fails(cli, capsys, tmp_path, DEMO_MODEL, calib)
    assert "(1, 9, 9)" in err and "(1, 1, 8, 8)" in err


def test_calibration_dtype_mismatch(cli, capsys, tmp_path):
    calib = tmp_path / "ints.npy"
    np.save(calib, np.zeros((10, 1, 8, 8), np.uint8))
    err = quantize_fails(cli, capsys, tmp_path, DEMO_MODEL, calib)
    assert "dtype uint8" in err and "float32" in err


def test_empty_calibration_set(cli, capsys, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    err = quantize_fails(cli, capsys, tmp_path, DEMO_MODEL, empty)
    assert "empty" in err


def test_nan_and_inf_in_calibration_data(cli, capsys, tmp_path, digits_arrays):
    data = digits_arrays[0][:30].copy()
    data[3, 0, 0, 0] = np.nan
    data[7, 0, 1, 1] = np.inf
    calib = tmp_path / "nan.npy"
    np.save(calib, data)
    err = quantize_fails(cli, capsys, tmp_path, DEMO_MODEL, calib)
    assert "2 sample(s) contain NaN or Inf" in err and "nan.npy[3]" in err and "nan.npy[7]" in err


def test_unreadable_image_is_named_with_other_problems(cli, capsys, tmp_path):
    folder = tmp_path / "imgs"
    shutil.copytree(DIGITS / "calib", folder)
    (folder / "0001.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    (folder / "labels.csv").write_text((folder / "labels.csv").read_text() + "0001.png,1\n")
    err = quantize_fails(cli, capsys, tmp_path, DEMO_MODEL, folder)
    assert "0001.png" in err and "cannot read image" in err


def test_unknown_method_lists_valid_ones(cli, capsys, tmp_path, calib_npy):
    err = quantize_fails(cli, capsys, tmp_path, DEMO_MODEL, calib_npy, "--method", "kl")
    assert "unknown calibration method 'kl'" in err and "entropy, minmax, mse, percentile" in err


def test_failed_run_keeps_existing_output_untouched(cli, capsys, tmp_path, calib_npy):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("previous result")
    assert cli("quantize", DEMO_MODEL, "--calib", calib_npy, "-o", out, "--method", "nope") == 2
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_savedmodel_with_ops_tflite_lacks_names_every_op(cli, capsys, tmp_path, calib_npy):
    import tensorflow as tf

    class Odd(tf.Module):
        def __init__(self):
            self.w = tf.Variable(tf.ones([8, 4]))

        @tf.function(input_signature=[tf.TensorSpec([1, 8], tf.float32)])
        def __call__(self, x):
            y = tf.math.erf(tf.matmul(x, self.w))
            return tf.math.digamma(y + 3.0)

    tf.saved_model.save(Odd(), str(tmp_path / "odd"))
    np.save(tmp_path / "c.npy", np.ones((10, 8), np.float32))
    err = quantize_fails(cli, capsys, tmp_path, tmp_path / "odd", tmp_path / "c.npy")
    assert "tf.Erf" in err and "tf.Digamma" in err and "2 operator(s)" in err


def test_keras_model_with_float_only_ops_names_every_op(cli, capsys, tmp_path):
    import keras

    inputs = keras.Input((8,), batch_size=1)
    x = keras.layers.Dense(4)(inputs)
    y = keras.ops.sin(x)
    z = keras.ops.cos(x)
    model = keras.Model(inputs, keras.layers.Add()([y, z]))
    model.save(tmp_path / "trig.keras")
    np.save(tmp_path / "c.npy", np.ones((10, 8), np.float32))
    err = quantize_fails(cli, capsys, tmp_path, tmp_path / "trig.keras", tmp_path / "c.npy")
    assert "SIN" in err and "COS" in err and "int8" in err
