"""Constant folding on the float-.tflite route (issue 25): float16 weights with DEQUANTIZE (as MediaPipe and
TFLiteConverter's float16 mode write them), sparse weights with DENSIFY, and any op on constants become float32
constants before calibration, so they are never taken for activations; TF's MLIR quantizer failures name the
tensor, the op, the cause and the fix instead of leaking MLIR."""
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter

from edgekit.errors import ConversionError
from edgekit.export.fold_constants import fold_constants
from edgekit.tflite_graph import read_graph

ZOO = Path(__file__).resolve().parent / "fixtures" / "zoo"
FACE_DETECTION = ZOO / "mediapipe" / "face_detection_short_range.tflite"


def _outputs(model: bytes, x: np.ndarray) -> list:
    interp = Interpreter(model_content=model, num_threads=1)
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    return [interp.get_tensor(o["index"]).copy() for o in interp.get_output_details()]


def _keras_model(tf):
    tf.keras.utils.set_random_seed(0)
    inp = tf.keras.Input((8, 8, 3), batch_size=1)
    x = tf.keras.layers.Conv2D(4, 3, activation="relu")(inp)
    x = tf.keras.layers.DepthwiseConv2D(3, padding="same")(x)
    x = tf.keras.layers.Flatten()(x)
    return tf.keras.Model(inp, [tf.keras.layers.Dense(5)(x), tf.keras.layers.Dense(3, activation="sigmoid")(x)])


@pytest.fixture(scope="module")
def fp16_tflite(tmp_path_factory) -> Path:
    """A Keras model converted with supported_types=[tf.float16]: float16 weights, one DEQUANTIZE per weight."""
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_keras_model(_keras_model(tf))
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_types = [tf.float16]
    path = tmp_path_factory.mktemp("fp16") / "fp16.tflite"
    path.write_bytes(converter.convert())
    return path


def _folded_checks(data: bytes, folded: bytes) -> None:
    before, after = read_graph(data), read_graph(folded)
    assert "DEQUANTIZE" in Counter(op.name for op in before.ops)
    assert not {"DEQUANTIZE", "DENSIFY"} & {op.name for op in after.ops}
    assert not [t for t in after.tensors if t.type == "FLOAT16"]  # the float16 copies are gone, not only unused
    x = np.random.default_rng(0).uniform(-1, 1, before.tensors[before.inputs[0]].shape).astype(np.float32)
    for a, b in zip(_outputs(data, x), _outputs(folded, x)):
        assert np.array_equal(a, b)  # LiteRT's own DEQUANTIZE: float16 -> float32 is exact


def test_fp16_weights_fold_into_float32_constants(fp16_tflite):
    data = fp16_tflite.read_bytes()
    result = fold_constants(data, "fp16")
    assert result.folded == {"DEQUANTIZE": 5}
    _folded_checks(data, result.data)
    assert "5 DEQUANTIZE" in result.note


def test_model_without_constant_ops_is_returned_unchanged(demo_float_tflite):
    data = demo_float_tflite.read_bytes()
    result = fold_constants(data)
    assert result.data is data and result.folded == {}


def test_sparse_weights_with_densify_fold(tmp_path):
    """TF's sparsity mode on a mostly-zero weight writes a sparse float32 tensor + DENSIFY (then DEQUANTIZE-free)."""
    import tensorflow as tf

    tf.keras.utils.set_random_seed(1)
    inp = tf.keras.Input((16,), batch_size=1)
    dense = tf.keras.layers.Dense(32)
    model = tf.keras.Model(inp, dense(inp))
    kernel = dense.kernel.numpy()
    kernel[np.random.default_rng(0).uniform(size=kernel.shape) < 0.9] = 0.0  # 90 % zeros: TF keeps it sparse
    dense.kernel.assign(kernel)
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.EXPERIMENTAL_SPARSITY]
    data = converter.convert()
    ops = Counter(op.name for op in read_graph(data).ops)
    assert ops["DENSIFY"] == 1, ops  # what this test is about: TF wrote a DENSIFY
    result = fold_constants(data, "sparse")
    assert result.folded == {"DENSIFY": 1}
    after = read_graph(result.data)
    assert [op.name for op in after.ops] == ["FULLY_CONNECTED"]
    x = np.random.default_rng(2).standard_normal((1, 16)).astype(np.float32)
    assert np.array_equal(_outputs(data, x)[0], _outputs(result.data, x)[0])


def test_quantize_fp16_model_end_to_end(fp16_tflite, tmp_path):
    """`edgekit quantize` on the float16-weight model: no degenerate 'Bias_dequantize' activations, no MLIR error,
    a full-int8 model with int8 weights; the report says the constants were folded."""
    from edgekit.quantize import quantize

    calib = tmp_path / "calib.npy"
    np.save(calib, np.random.default_rng(0).uniform(-1, 1, (20, 8, 8, 3)).astype(np.float32))
    result = quantize(str(fp16_tflite), calib, tmp_path / "out")
    graph = read_graph((tmp_path / "out" / result.main_file).read_bytes())
    assert {op.name for op in graph.ops} <= {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "RESHAPE", "LOGISTIC"}
    assert {t.type for t in graph.tensors if t.constant} <= {"INT8", "INT32"}
    assert "folded" in (tmp_path / "out" / "report.md").read_text()
    assert result.parity.passed  # the folded float32 weights equal the float16 ones: int8 tracks the float model


def test_mlir_failure_names_tensor_op_cause_and_fix(fp16_tflite):
    """Without folding, float16 weights make TF's quantizer fail with raw MLIR diagnostics ('tfl.sub' element types,
    'scale out of expressed type range'); the error names the location, the cause and the fix, and no MLIR text."""
    from edgekit.converters.tflite.int8 import calibrated_flatbuffer, quantize_calibrated
    from edgekit.tflite_model import TFLiteModel

    data = fp16_tflite.read_bytes()
    model = TFLiteModel(data)
    calibrated = calibrated_flatbuffer(data, {i: (-1.0, 1.0) for i in model.activation_tensors()})
    with pytest.raises(ConversionError) as info:
        quantize_calibrated(calibrated)
    message, fix = str(info.value), info.value.fix
    assert "at tensor 'functional" in message and "CONV_2D op #" in message, message
    assert "float16 weights" in message and "failed on failed" not in message
    assert "%" not in message and "tensor<" not in message and "loc(" not in message
    assert "folds DEQUANTIZE" in fix


def test_diagnostic_parser_skips_raw_mlir_and_suggests_keep_float():
    from edgekit.converters.tflite.diagnostics import explain, parse_diagnostics

    text = ('fully_quantize: 1, inference_type: 6\n'
            'loc(fused["model/head/MatMul", "model/head/BiasAdd"]): error: \'tfl.fully_connected\' op quantized '
            'bias out of range\n'
            'note: see current operation: %12 = "tfl.fully_connected"(%1, %2) : (tensor<1x8xf32>) -> tensor<1x2xf32>\n')
    parsed = parse_diagnostics(text)
    assert [(d.names, d.mlir_op, d.message) for d in parsed] == [
        (("model/head/MatMul", "model/head/BiasAdd"), "fully_connected", "quantized bias out of range")]
    message, fix = explain(text)
    assert message == ("the TFLite int8 quantizer failed at tensor 'model/head/MatMul': MLIR op tfl.fully_connected: "
                       "quantized bias out of range")
    assert "--keep-float model/head/MatMul" in fix
    message, fix = explain("RuntimeError\n")
    assert "without a diagnostic" in message and "--verbose" in fix


def test_real_mediapipe_model_folds_and_quantizes(tmp_path):
    """MediaPipe face detection (float16 weights, 74 DEQUANTIZE) used to stop with 'degenerate calibration ...
    Bias_dequantize: peak |value| 0'; folded, it calibrates and quantizes to full int8."""
    from edgekit.quantize import quantize

    data = FACE_DETECTION.read_bytes()
    result = fold_constants(data, FACE_DETECTION.name)
    assert result.folded == {"DEQUANTIZE": 74}
    _folded_checks(data, result.data)
    calib = tmp_path / "calib.npy"
    np.save(calib, np.random.default_rng(0).uniform(-1, 1, (10, 128, 128, 3)).astype(np.float32))
    quantized = quantize(str(FACE_DETECTION), calib, tmp_path / "out")
    graph = read_graph((tmp_path / "out" / quantized.main_file).read_bytes())
    assert "DEQUANTIZE" not in {op.name for op in graph.ops}
    assert {t.type for t in graph.tensors if not t.constant} <= {"INT8"}
