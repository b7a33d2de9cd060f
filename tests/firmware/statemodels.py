"""Stateful int8 .tflite models built with TensorFlow (resource variables + a CALL_ONCE init subgraph).

The TFLite converter with ``experimental_enable_resource_variables`` and ``_experimental_variable_quantization``
(as microWakeWord converts its streaming models) keeps tf.Variables as int8 resource variables: subgraph 0 holds
CALL_ONCE, VAR_HANDLE, READ_VARIABLE and ASSIGN_VARIABLE; subgraph 1 assigns the initial values.
"""
from __future__ import annotations

from typing import Callable, Iterator, List

import numpy as np


def _convert(module, signature_fn: Callable, frame_shape, seed: int = 0) -> bytes:
    import tensorflow as tf

    conv = tf.lite.TFLiteConverter.from_concrete_functions([signature_fn.get_concrete_function()], module)
    conv.experimental_enable_resource_variables = True
    conv._experimental_variable_quantization = True  # int8 variables, as microWakeWord's streaming models
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    rng = np.random.default_rng(seed)

    def representative() -> Iterator[List[np.ndarray]]:
        for _ in range(100):
            yield [rng.uniform(-1, 1, frame_shape).astype(np.float32)]

    conv.representative_dataset = representative
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    return bytes(conv.convert())


def recurrent_mean_model() -> bytes:
    """Two state variables updated from their previous values (a recurrence: the output at step t depends on every
    earlier frame): s1 <- mean(s1, x), s2 <- mean(s2, x, x); output = FULLY_CONNECTED([s1, s2, x]). Ops: CALL_ONCE,
    VAR_HANDLE, READ_VARIABLE, CONCATENATION, MEAN, ASSIGN_VARIABLE, RESHAPE, FULLY_CONNECTED (all in edgekit)."""
    import tensorflow as tf

    class Recurrent(tf.Module):
        def __init__(self) -> None:
            rng = np.random.default_rng(1)
            self.s1 = tf.Variable(tf.fill([1, 1, 4], 0.25), trainable=False)
            self.s2 = tf.Variable(tf.fill([1, 1, 4], -0.5), trainable=False)
            self.w = tf.constant(rng.normal(size=(12, 6)).astype(np.float32) * 0.4)

        @tf.function(input_signature=[tf.TensorSpec([1, 1, 4], tf.float32)])
        def __call__(self, x):
            s1 = tf.reduce_mean(tf.concat([self.s1.read_value(), x], axis=1), axis=1, keepdims=True)
            self.s1.assign(s1)
            s2 = tf.reduce_mean(tf.concat([self.s2.read_value(), x, x], axis=1), axis=1, keepdims=True)
            self.s2.assign(s2)
            return tf.matmul(tf.reshape(tf.concat([s1, s2, x], axis=1), [1, 12]), self.w)

    m = Recurrent()
    return _convert(m, m.__call__, (1, 1, 4))


def streaming_conv_model(frames: int = 3, channels: int = 4, filters: int = 5) -> bytes:
    """A streaming convolution over time: the last ``frames - 1`` input frames live in a variable; each call
    concatenates the new frame, convolves the ``frames``-frame window and keeps the newest ``frames - 1`` frames
    (CONCATENATION + STRIDED_SLICE, microWakeWord's stream layer). Needs STRIDED_SLICE."""
    import tensorflow as tf

    class Streaming(tf.Module):
        def __init__(self) -> None:
            rng = np.random.default_rng(2)
            self.buf = tf.Variable(tf.zeros([1, frames - 1, 1, channels]), trainable=False)
            self.w = tf.constant(rng.normal(size=(frames, 1, channels, filters)).astype(np.float32) * 0.3)

        @tf.function(input_signature=[tf.TensorSpec([1, 1, 1, channels], tf.float32)])
        def __call__(self, x):
            window = tf.concat([self.buf, x], axis=1)
            self.buf.assign(window[:, 1:, :, :])
            return tf.nn.relu(tf.nn.conv2d(window, self.w, strides=1, padding="VALID"))

    m = Streaming()
    return _convert(m, m.__call__, (1, 1, 1, 4))
