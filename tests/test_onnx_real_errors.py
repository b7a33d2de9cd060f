"""ONNX models that are not MLPerf-shaped reach TFLite, and onnx2tf failures name their real cause (issue 29).

Real models seen: tensor names with '@' (TF rejects them as Keras scope names), a 2-D audio input (onnx2tf's
NCHW-keeping option takes 3-5-D inputs only), an ONNX-ML classifier head (LinearClassifier / ZipMap). Before, every
one of them was reported as "the model has an input dimension that is not fixed", because onnx2tf prints its
generic advice (mentioning dynamic dimensions and -b/-ois) after every failure.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.conftest import run_cli


def _save(path, nodes, inputs, outputs, initializers=(), opsets=(("", 17),)):
    import onnx

    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    model.ir_version = 9
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def test_names_tensorflow_rejects_are_renamed(tmp_path):
    """'@' and ':' in tensor/node names: converted (renamed), outputs equal to onnxruntime's."""
    import onnxruntime as ort
    from ai_edge_litert.interpreter import Interpreter

    from edgekit.export.onnx_source import float_tflite_from_onnx

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w@0")
    bias = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "onnx::Conv_123")
    nodes = [helper.make_node("Conv", ["in@put", "w@0", "onnx::Conv_123"], ["/conv@1/out"], name="/conv@1/Conv",
                              pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["/conv@1/out"], ["out@put"], name="relu@2")]
    path = _save(tmp_path / "at.onnx", nodes, [_vi("in@put", (1, 3, 8, 8))], [_vi("out@put", (1, 4, 8, 8))],
                 [weight, bias])
    tflite = float_tflite_from_onnx(path)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    expected = ort.InferenceSession(str(path)).run(None, {"in@put": x})[0]
    interp = Interpreter(model_content=tflite)
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    got = interp.get_tensor(interp.get_output_details()[0]["index"])  # onnx2tf's outputs are channels-last
    np.testing.assert_allclose(got, expected.transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-4)


def test_two_dimensional_audio_input_converts(tmp_path):
    """A [1, 16000] input: the NCHW-keeping option is passed for 3-5-D inputs only."""
    from edgekit.export.onnx_source import float_tflite_from_onnx
    from edgekit.tflite_graph import read_graph

    rng = np.random.default_rng(1)
    weight = numpy_helper.from_array((rng.standard_normal((16000, 10)) * 0.01).astype(np.float32), "w")
    path = _save(tmp_path / "audio.onnx", [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                 [_vi("x", (1, 16000))], [_vi("y", (1, 10))], [weight])
    graph = read_graph(float_tflite_from_onnx(path))
    assert [graph.tensors[i].shape for i in graph.inputs] == [(1, 16000)]


def test_onnx_ml_head_is_named_not_called_corrupt_or_dynamic(tmp_path, capsys):
    rng = np.random.default_rng(2)
    head = helper.make_node("LinearClassifier", ["r"], ["label", "scores"], name="classifier",
                            coefficients=[float(v) for v in rng.standard_normal(12)], intercepts=[0.0, 0.1, 0.2],
                            classlabels_ints=[0, 1, 2])
    head.domain = "ai.onnx.ml"
    path = _save(tmp_path / "ml.onnx", [helper.make_node("Relu", ["x"], ["r"], name="relu"), head],
                 [_vi("x", (1, 4))], [_vi("label", (1,), TensorProto.INT64), _vi("scores", (1, 3))],
                 opsets=(("", 17), ("ai.onnx.ml", 3)))
    np.save(tmp_path / "calib.npy", rng.standard_normal((16, 4)).astype(np.float32))
    assert run_cli("quantize", path, "--calib", tmp_path / "calib.npy", "-o", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert "ai.onnx.ml::LinearClassifier at node #1 'classifier'" in err and "ONNX-ML operator" in err
    assert "--format onnx" in err and "not fixed" not in err and "corrupt" not in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


ONNX2TF_FAILURE = """\x1b[31mERROR:\x1b[0m The keep_ncw_or_nchw_or_ncdhw_input_names parameter only supports 3D/4D/5D input.
\x1b[31mERROR:\x1b[0m The trace log is below.
Traceback (most recent call last):
  File "onnx2tf/ops/Input.py", line 279, in make_node
AssertionError: \x1b[31mERROR:\x1b[0m The keep_ncw_or_nchw_or_ncdhw_input_names parameter only supports 3D/4D/5D input.
\x1b[31mERROR:\x1b[0m input_onnx_file_path: m.onnx
\x1b[31mERROR:\x1b[0m Read this and deal with it. https://github.com/PINTO0309/onnx2tf#parameter-replacement
\x1b[31mERROR:\x1b[0m Alternatively, if the input OP has a dynamic dimension, use the -b or -ois option to rewrite it to a static shape and try again.
\x1b[31mERROR:\x1b[0m If the input OP of ONNX before conversion is NHWC or an irregular channel arrangement other than NCHW, use the -kt or -kat option.
"""


def test_onnx2tf_boilerplate_is_not_read_as_the_cause():
    from edgekit.tool_messages import ONNX2TF, onnx2tf_causes, translate

    causes = onnx2tf_causes(ONNX2TF_FAILURE.splitlines())
    assert causes == ["The keep_ncw_or_nchw_or_ncdhw_input_names parameter only supports 3D/4D/5D input."]
    assert translate(ONNX2TF_FAILURE.splitlines(), ONNX2TF) is not None  # the old reading: "not fixed"
    assert translate(causes, ONNX2TF) is None or "not fixed" not in translate(causes, ONNX2TF).problem
    scope = ["ValueError: 'model/out@put/' is not a valid scope name. A scope name has to match the following"]
    assert onnx2tf_causes(scope) == ["'model/out@put/' is not a valid scope name. A scope name has to match the "
                                     "following"]


@pytest.mark.parametrize("name,fixed", [("a@b", "a_b"), ("onnx::Conv_1", "onnx__Conv_1"), ("/x/y.z-1", "/x/y.z-1")])
def test_sanitized_names_are_unique_and_consistent(name, fixed):
    from edgekit.export.onnx_source import sanitize_names

    nodes = [helper.make_node("Relu", ["x"], [name], name=name), helper.make_node("Neg", [name], [fixed], name="n")]
    graph = helper.make_graph(nodes, "g", [_vi("x", (1, 2))], [_vi(fixed, (1, 2))])
    model = helper.make_model(graph)
    renamed = sanitize_names(model)
    assert renamed == ([] if name == fixed else [name])
    produced = model.graph.node[0].output[0]
    assert model.graph.node[1].input[0] == produced and (name == fixed or produced != fixed)
