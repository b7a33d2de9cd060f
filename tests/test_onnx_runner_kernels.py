"""OnnxRunner: accuracy runs in the QDQ reference semantics (optimizations off), latency in the optimized session."""
from __future__ import annotations

import numpy as np
import pytest

from edgekit.parity.runners import OnnxRunner, host_int8_note

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _qdq_model(path):
    """x -> QuantizeLinear -> DequantizeLinear -> MatMul(W) -> y, a minimal QDQ graph."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, "w")
    scale = numpy_helper.from_array(np.array(0.05, np.float32), "s")
    zp = numpy_helper.from_array(np.array(0, np.int8), "zp")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "zp"], ["xd"]),
             helper.make_node("MatMul", ["xd", "w"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], [w, scale, zp])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_reference_is_the_default_and_says_so(tmp_path):
    path = tmp_path / "m.onnx"
    _qdq_model(path)
    ref, opt = OnnxRunner(path), OnnxRunner(path, kernels="optimized")
    assert ref.session.get_session_options().graph_optimization_level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    assert opt.session.get_session_options().graph_optimization_level != ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    assert ref.describe()["kernels"].startswith("onnxruntime, graph optimizations off: QDQ reference semantics")
    assert "default graph optimizations" in opt.describe()["kernels"]
    x = np.array([[0.1, -0.37, 0.52, 1.0]], np.float32)
    expected = (np.clip(np.round(x / 0.05), -128, 127) * 0.05) @ (np.arange(12, dtype=np.float32).reshape(4, 3) / 10)
    np.testing.assert_allclose(ref.run([x])[0][0], expected, rtol=1e-6)
    with pytest.raises(ValueError, match="kernels"):
        OnnxRunner(path, kernels="fast")


@pytest.mark.parametrize("flags, noted", [
    ("fpu sse avx avx2 fma", True),                  # AVX2 without VNNI: vpmaddubsw saturation
    ("fpu sse avx avx2 avx512f avx512_vnni", False),
    ("fpu sse avx avx2 avx_vnni", False),
    ("fp asimd", None),                              # not x86 (arm64 cpuinfo has 'Features', no flags line)
])
def test_host_int8_note(tmp_path, flags, noted):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\n" + (f"flags\t\t: {flags}\n" if noted is not None else f"Features\t: {flags}\n"))
    note = host_int8_note(cpuinfo)
    assert (note is not None) == bool(noted)
    if noted:
        assert "vpmaddubsw" in note and "VNNI" in note
    assert host_int8_note(tmp_path / "missing") is None
