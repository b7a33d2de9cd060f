"""UNIDIRECTIONAL_SEQUENCE_LSTM, fully integer 8x8->16 (int8 in/out, int16 cell state and gates), bit-exact with
LiteRT BUILTIN_REF; the output and cell states are variable tensors carried across invocations."""
from __future__ import annotations

from typing import List, Optional

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

from edgekit.errors import EdgekitError
from edgekit.firmware import host_runtime as hr
from tests.firmware.opmodels import T, _aligned_buffers, build_graph, litert_sequence


def lstm_model(rng, batch: int, time: int, n_input: int, n_cell: int, *, cell_log2: int = -11,
               cell_clip: float = 10.0, hidden_zp: Optional[int] = None, time_major: bool = False,
               peephole: bool = False) -> bytes:
    """A single UNIDIRECTIONAL_SEQUENCE_LSTM as the TFLite converter lays out a quantized Keras LSTM: 24 inputs
    (no CIFG, peephole, projection or layer norm), the states as variable inputs 18/19, 5 intermediates."""
    in_scale, in_zp = float(rng.uniform(0.02, 0.06)), int(rng.integers(-20, 20))
    h_scale, h_zp = float(rng.uniform(0.004, 0.01)), int(rng.integers(-8, 8))
    shape_in = (time, batch, n_input) if time_major else (batch, time, n_input)
    shape_out = (time, batch, n_cell) if time_major else (batch, time, n_cell)
    tensors: List[Optional[T]] = [None] * 24
    tensors[0] = T(shape_in, "int8", in_scale, in_zp, name="input")
    for g in range(4):
        tensors[1 + g] = T((n_cell, n_input), "int8", float(rng.uniform(0.005, 0.03)), 0,
                           data=rng.integers(-127, 128, (n_cell, n_input)))
        tensors[5 + g] = T((n_cell, n_cell), "int8", float(rng.uniform(0.005, 0.03)), 0,
                           data=rng.integers(-127, 128, (n_cell, n_cell)))
        tensors[12 + g] = T((n_cell,), "int32", 1e-4, 0, data=rng.integers(-3000, 3000, (n_cell,)))
    if peephole:
        for g in range(3):
            tensors[9 + g] = T((n_cell,), "int16", 1e-3, 0, data=rng.integers(-3000, 3000, (n_cell,)))
    tensors[18] = T((batch, n_cell), "int8", h_scale, h_zp, name="output_state")
    tensors[19] = T((batch, n_cell), "int16", 2.0 ** cell_log2, 0, name="cell_state")
    output = T(shape_out, "int8", h_scale, h_zp, name="output")
    inter = [T((), "int16", 2.0 ** -12, 0, name=f"inter{k}") for k in range(4)]
    inter.append(T((), "int8", h_scale, h_zp if hidden_zp is None else hidden_zp, name="hidden"))
    present = [t for t in tensors if t is not None] + [output] + inter
    idx = {id(t): i for i, t in enumerate(present)}
    op_inputs = [idx[id(t)] if t is not None else -1 for t in tensors]
    options = {"cell_clip": cell_clip, "time_major": time_major}
    model = build_graph(present, [("UNIDIRECTIONAL_SEQUENCE_LSTM", op_inputs, [idx[id(output)]], options)],
                        [0], [idx[id(output)]])
    obj = schema.ModelT.InitFromPackedBuf(model, 0)
    sub = obj.subgraphs[0]
    sub.operators[0].intermediates = [idx[id(t)] for t in inter]
    for k in (18, 19):
        sub.tensors[op_inputs[k]].isVariable = True
    builder = flatbuffers.Builder(1024)
    with _aligned_buffers():
        builder.Finish(obj.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())



CASES = [  # batch, time, inputs, cells, cell scale log2, cell clip, hidden zp (None: the output state's)
    (1, 4, 3, 5, -11, 10.0, None),
    (2, 6, 8, 12, -11, 0.0, None),
    (3, 3, 5, 7, -12, 3.0, 5),
    (1, 10, 16, 20, -10, 10.0, -3),
]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_lstm_is_bit_exact_and_carries_its_state(case, seed):
    rng = np.random.default_rng(1000 * case + seed)
    batch, time, n_input, n_cell, cell_log2, clip, hidden_zp = CASES[case]
    model = lstm_model(rng, batch, time, n_input, n_cell, cell_log2=cell_log2, cell_clip=clip, hidden_zp=hidden_zp)
    xs = [rng.integers(-128, 128, (batch, time, n_input), dtype=np.int8) for _ in range(3)]
    ref = litert_sequence(model, xs)
    # the reference carries the state: the same input a second time gives another output
    again = litert_sequence(model, [xs[0], xs[0]])
    assert not np.array_equal(again[0], again[1])
    rt = hr.HostRuntime(model)
    got = [rt.invoke([x])[0] for x in xs]
    differing = sum(int((r != g).sum()) for r, g in zip(ref, got))
    assert differing == 0, f"{differing} of {sum(r.size for r in ref)} elements differ over 3 invocations"
    assert len({int(v) for r in ref for v in r.ravel()}) > 8  # the outputs are not saturated constants
    rt.reset()
    assert np.array_equal(rt.invoke([xs[0]])[0], ref[0])


@pytest.mark.parametrize("variant, message", [
    ({"time_major": True}, "time_major"),
    ({"peephole": True}, "peephole"),
])
def test_lstm_refuses_unsupported_variants(variant, message):
    model = lstm_model(np.random.default_rng(5), 1, 3, 4, 6, **variant)
    with pytest.raises(EdgekitError, match=message):
        hr.HostRuntime(model)


def test_support_report_names_the_refused_lstm_variant():
    from edgekit.firmware.support import check_support
    from edgekit.tflite_graph import read_graph

    plain = lstm_model(np.random.default_rng(6), 1, 3, 4, 6)
    peephole = lstm_model(np.random.default_rng(6), 1, 3, 4, 6, peephole=True)
    assert check_support(read_graph(plain)).ok
    report = check_support(read_graph(peephole))
    assert not report.ok
    assert any("peephole connections is not supported" in o.reason for o in report.ops)


@pytest.mark.slow
@pytest.mark.parametrize("return_sequences", [True, False])
def test_converted_keras_lstm_is_bit_exact(return_sequences):
    """A tf_keras (Keras 2) LSTM through the TFLite converter, full int8: it fuses into one
    UNIDIRECTIONAL_SEQUENCE_LSTM with 5 intermediates. (Keras 3's LSTM converts to a WHILE loop instead, and the
    converter's calibrator crashed on it here: tf 2.21 / keras 3.15.)"""
    tf = pytest.importorskip("tensorflow")
    tf_keras = pytest.importorskip("tf_keras")
    from edgekit.tflite_graph import read_graph

    batch, time, n_input, units = 2, 6, 4, 8
    tf_keras.utils.set_random_seed(3)
    inp = tf_keras.Input(shape=(time, n_input), batch_size=batch)
    model = tf_keras.Model(inp, tf_keras.layers.LSTM(units, return_sequences=return_sequences)(inp))

    def representative():
        r = np.random.default_rng(0)
        for _ in range(16):
            yield [r.uniform(-1, 1, (batch, time, n_input)).astype(np.float32)]

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = representative
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = conv.inference_output_type = tf.int8
    tflite = conv.convert()
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in [op.name for op in read_graph(tflite).ops]
    rng = np.random.default_rng(4)
    xs = [rng.integers(-128, 128, (batch, time, n_input), dtype=np.int8) for _ in range(3)]
    ref = litert_sequence(tflite, xs)
    rt = hr.HostRuntime(tflite)
    got = [rt.invoke([x])[0] for x in xs]
    assert sum(int((r != g).sum()) for r, g in zip(ref, got)) == 0
