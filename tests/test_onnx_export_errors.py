"""The ONNX -> float .tflite route (onnx2tf) on models found in issue 25's survey: a 2-D input converts (it was
refused: onnx2tf's keep-NCHW option only takes 3-D..5-D inputs), and a failure on a static-shape model names the
failing ONNX node instead of onnx2tf's generic "dynamic dimension" footer (RapidOCR's angle classifier failed in
onnx2tf's Softmax and was reported as "the model has an input dimension that is not fixed")."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from edgekit.errors import ConversionError


def _gemm_softmax(shape) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    features = int(np.prod(shape[1:]))
    nodes = [helper.make_node("Flatten", ["x"], ["f"]), helper.make_node("Gemm", ["f", "W", "B"], ["g"]),
             helper.make_node("Softmax", ["g"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
                              [numpy_helper.from_array(rng.standard_normal((features, 2)).astype(np.float32), "W"),
                               numpy_helper.from_array(np.zeros(2, np.float32), "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    return model


def test_two_dimensional_onnx_input_converts_and_quantizes(tmp_path, cli):
    path = tmp_path / "flat.onnx"
    onnx.save(_gemm_softmax((1, 8)), str(path))
    calib = tmp_path / "calib.npy"
    np.save(calib, np.random.default_rng(1).standard_normal((10, 8)).astype(np.float32))
    assert cli("quantize", path, "--calib", calib, "-o", tmp_path / "out") == 0
    assert (tmp_path / "out" / "model_int8.tflite").is_file()


# What onnx2tf 1.28.8 printed converting RapidOCR 3.10.0's ch_ppocr_mobile_v2.0_cls_mobile.onnx (onnxsim'd to a
# fixed 1x3x48x192 input), shortened: the failing node, the exception, then the advice it prints after any failure.
ONNX2TF_OUTPUT = [
    "\x1b[31mERROR:\x1b[0m The trace log is below.",
    "Traceback (most recent call last):",
    'ValueError: Exception encountered when calling layer "tf.nn.softmax" (type TFOpLambda).',
    "\x1b[31mERROR:\x1b[0m input_onnx_file_path: cls.onnx",
    "\x1b[31mERROR:\x1b[0m onnx_op_name: Softmax@0",
    "\x1b[31mERROR:\x1b[0m Read this and deal with it. https://github.com/PINTO0309/onnx2tf#parameter-replacement",
    "\x1b[31mERROR:\x1b[0m Alternatively, if the input OP has a dynamic dimension, use the -b or -ois option to "
    "rewrite it to a static shape and try again.",
    "\x1b[31mERROR:\x1b[0m If the input OP of ONNX before conversion is NHWC or an irregular channel arrangement "
    "other than NCHW, use the -kt or -kat option.",
    "\x1b[31mERROR:\x1b[0m Also, for models that include NonMaxSuppression in the post-processing, try the -onwdt option.",
]


def test_static_model_failure_names_the_node_not_a_dynamic_dimension():
    from edgekit.export.onnx_source import _conversion_failure

    error = _conversion_failure("cls.onnx", _gemm_softmax((1, 3, 4, 4)), list(ONNX2TF_OUTPUT))
    assert isinstance(error, ConversionError)
    text = str(error)
    assert "failed on ONNX node 'Softmax@0'" in text and "tf.nn.softmax" in text
    assert "not fixed" not in text and "dynamic" not in text and "\x1b" not in text
    assert "--format onnx" in error.fix and "-ois" not in error.fix


def test_dynamic_model_failure_still_asks_for_input_shape():
    from edgekit.export.onnx_source import _conversion_failure

    model = _gemm_softmax((1, 8))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    error = _conversion_failure("m.onnx", model, ["input shape [None, 8] is undefined. Use the -b option"])
    assert "not fixed" in str(error) and "--input-shape" in error.fix
