"""Export details found by the MLPerf benchmark: hybrid .tflite weights, Keras batch, bias count, export cache."""
import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter

from edgekit.export.tflite_source import dequantize_hybrid_weights


def _run(model: bytes, x: np.ndarray) -> np.ndarray:
    interp = Interpreter(model_content=model)
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


def test_hybrid_weights_are_dequantized(mlperf):
    hybrid = (mlperf / "kws_ref_model_float32.tflite").read_bytes()
    floated = dequantize_hybrid_weights(hybrid)
    ops = Interpreter(model_content=floated)._get_ops_details()
    details = {t["index"]: t for t in Interpreter(model_content=floated).get_tensor_details()}
    for op in ops:
        if op["op_name"] in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
            assert details[op["inputs"][1]]["dtype"] == np.float32, op
    x = np.random.default_rng(0).standard_normal((1, 49, 10, 1)).astype(np.float32)
    # the hybrid model also quantizes activations on the fly, so the two agree closely but not exactly
    assert np.allclose(_run(hybrid, x), _run(floated, x), atol=0.01)


def test_float_model_without_quantized_weights_is_unchanged(demo_float_tflite):
    data = demo_float_tflite.read_bytes()
    assert dequantize_hybrid_weights(data) is data


@pytest.mark.slow
def test_keras_export_pins_batch_one(mlperf):
    from edgekit.export.detect import ModelKind
    from edgekit.export.tf_source import float_tflite_from_tf

    data = float_tflite_from_tf(mlperf / "ic_resnet8.h5", ModelKind.KERAS)
    interp = Interpreter(model_content=data)
    names = {op["op_name"] for op in interp._get_ops_details()}
    assert not names & {"SHAPE", "STRIDED_SLICE", "PACK"}, names
    assert list(interp.get_input_details()[0]["shape"]) == [1, 32, 32, 3]


def test_bias_count_is_conv_and_fc_biases_only(mlperf):
    from edgekit.converters.tflite.int8 import inspect_int8

    data = (mlperf / "kws_ref_model_int8.tflite").read_bytes()
    _, tensors, ops = inspect_int8(data)
    biased = sum(1 for name in ops if name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"))
    int32_constants = sum(1 for t in tensors if t.constant and t.dtype == "INT32")
    assert sum(t.is_bias for t in tensors) == biased
    assert int32_constants > biased  # the RESHAPE shape tensor is int32 too, and is not a bias


def test_export_is_cached(tmp_path, monkeypatch, caplog):
    import logging

    from tests.conftest import DEMO_MODEL
    from edgekit.export import to_float_tflite

    monkeypatch.setenv("EDGEKIT_CACHE_DIR", str(tmp_path / "cache"))
    first = to_float_tflite(str(DEMO_MODEL))
    with caplog.at_level(logging.INFO, logger="edgekit.export"):
        second = to_float_tflite(str(DEMO_MODEL))
    assert second.tflite == first.tflite and second.route == first.route
    assert any("from cache" in r.message for r in caplog.records)
    # a damaged cache entry is ignored, not used
    for entry in (tmp_path / "cache" / "exports").glob("*.tflite"):
        entry.write_bytes(b"garbage")
    third = to_float_tflite(str(DEMO_MODEL))
    assert third.tflite == first.tflite
