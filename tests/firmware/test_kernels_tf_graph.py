"""A TFLiteConverter full-int8 graph of the new kernels (SUB, SQUARED_DIFFERENCE, MAXIMUM, GREATER, SELECT,
L2_NORMALIZATION, FULLY_CONNECTED, LOG_SOFTMAX, REDUCE_MAX, BATCH_MATMUL, ARG_MAX) bit-exact with LiteRT BUILTIN_REF
on the host runtime: the quantization parameters and op versions a real converter writes, not hand-built ones."""
from __future__ import annotations

import numpy as np
import pytest

from edgekit.firmware.host_runtime import HostRuntime, op_codes, op_name
from tests.firmware.opmodels import random_input, reference
from tests.firmware.test_kernels_elementwise import differing


def converted_graph() -> bytes:
    import tensorflow as tf

    w = tf.constant(np.random.default_rng(0).standard_normal((16, 12)).astype(np.float32) * 0.3)
    c = tf.constant(np.random.default_rng(1).standard_normal((16,)).astype(np.float32) * 0.5)

    @tf.function(input_signature=[tf.TensorSpec([1, 6, 16], tf.float32)])
    def graph(x):
        a = tf.subtract(x, c)
        s = tf.where(x > c, tf.maximum(a, -0.5), a)
        n = tf.math.l2_normalize(s, axis=-1)
        return (tf.nn.log_softmax(tf.matmul(n, w), axis=-1), tf.reduce_max(tf.math.squared_difference(a, x), axis=-1),
                tf.matmul(n, n, transpose_b=True), tf.argmax(tf.matmul(n, w), axis=-1, output_type=tf.int32))

    converter = tf.lite.TFLiteConverter.from_concrete_functions([graph.get_concrete_function()], graph)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    rng = np.random.default_rng(2)
    converter.representative_dataset = lambda: ([rng.standard_normal((1, 6, 16)).astype(np.float32)] for _ in range(50))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    return converter.convert()


@pytest.mark.slow
def test_converter_graph_of_the_new_ops_is_bit_exact():
    model = converted_graph()
    ops = {op_name(c) for c in op_codes(model)}
    assert {"SUB", "SQUARED_DIFFERENCE", "MAXIMUM", "GREATER", "SELECT", "L2_NORMALIZATION", "LOG_SOFTMAX",
            "REDUCE_MAX", "BATCH_MATMUL", "ARG_MAX"} <= ops, ops
    rng = np.random.default_rng(5)
    for optimize in (None, "balanced"):
        rt = HostRuntime(model, optimize=optimize)
        for _ in range(3):
            x = random_input(model, rng)
            for i, (e, g) in enumerate(zip(reference(model, x), rt.invoke(x))):
                assert differing(e, g) == 0, f"output {i} ({e.dtype}) differs from BUILTIN_REF (optimize={optimize})"
