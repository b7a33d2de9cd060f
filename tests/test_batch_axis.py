"""Inputs that are not batch-first (issue 29): a recurrent state [2, batch, 128] beside an audio input. The data
always holds samples on its first axis; each input's batch axis is detected (axis 0 when it is 1, else the first
axis of size 1) or named with --batch-axis INPUT=AXIS|none, and messages speak per sample."""
from __future__ import annotations

import json

import numpy as np
import pytest

from edgekit.calibration.dataset import InputSpec, batch_axis_of, with_batch_axes
from edgekit.errors import CalibrationDataError
from tests.conftest import run_cli


@pytest.mark.parametrize("shape,axis", [((1, 3, 8, 8), 0), ((-1, 16000), 0), ((2, 1, 128), 1), ((16000,), None),
                                        ((), None), ((2, 3, -1), 2)])
def test_batch_axis_is_detected(shape, axis):
    assert batch_axis_of(InputSpec("x", shape, np.dtype(np.float32))) == axis


def test_named_batch_axes_are_checked_all_at_once():
    inputs = [InputSpec("audio", (1, 40), np.dtype(np.float32)), InputSpec("state", (2, 1, 16), np.dtype(np.float32))]
    named = with_batch_axes(inputs, [("state", "-2"), ("audio", "none")])
    assert [batch_axis_of(s) for s in named] == [None, 1]
    with pytest.raises(CalibrationDataError) as err:
        with_batch_axes(inputs, [("state", "0"), ("nosuch", "1"), ("audio", "x")])
    text = "\n".join(err.value.problems)
    assert "state=0: input 'state' (2, 1, 16) has no batch-sized axis" in text
    assert "'nosuch' is not a model input (inputs: audio, state)" in text and "audio=x" in text


@pytest.fixture(scope="module")
def streaming_model(tmp_path_factory):
    """A float .tflite with an audio input [1, 40] and a recurrent state [2, 1, 16] (batch on axis 1)."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    w_in = tf.constant(rng.normal(0, 0.3, (40, 16)).astype(np.float32))
    w_h = tf.constant(rng.normal(0, 0.3, (16, 16)).astype(np.float32))
    w_out = tf.constant(rng.normal(0, 0.3, (16, 4)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([1, 40], tf.float32, name="audio"),
                                  tf.TensorSpec([2, 1, 16], tf.float32, name="state")])
    def step(audio, state):
        h = tf.nn.relu(tf.matmul(audio, w_in) + tf.matmul(state[0], w_h) + tf.matmul(state[1], w_h))
        return tf.matmul(h, w_out)

    converter = tf.lite.TFLiteConverter.from_concrete_functions([step.get_concrete_function()], step)
    root = tmp_path_factory.mktemp("state")
    (root / "step.tflite").write_bytes(converter.convert())
    np.savez(root / "data.npz", audio=rng.normal(size=(40, 40)).astype(np.float32),
             state=rng.uniform(0, 1, (40, 2, 16)).astype(np.float32))
    np.savez(root / "wrong.npz", audio=rng.normal(size=(8, 40)).astype(np.float32),
             state=rng.uniform(0, 1, (8, 2, 15)).astype(np.float32))
    return root


def test_state_input_with_batch_on_axis_one_quantizes(streaming_model, tmp_path):
    root = streaming_model
    code = run_cli("quantize", root / "step.tflite", "--calib", root / "data.npz", "--output-kind",
                   "Identity=regression", "-o", tmp_path / "out")
    assert code == 0
    parity = json.loads((tmp_path / "out" / "parity.json").read_text())
    assert parity["passed"] and parity["samples"] == 8


def test_a_wrong_state_shape_is_named_per_sample(streaming_model, tmp_path, capsys):
    root = streaming_model
    assert run_cli("quantize", root / "step.tflite", "--calib", root / "wrong.npz", "-o", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert "one sample of input 'state' is (2, 15), the model needs (2, 16) per sample" in err
    assert "batch axis 1" in err and "Traceback" not in err and not (tmp_path / "out").exists()
