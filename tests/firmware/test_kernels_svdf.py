"""SVDF (integer path: int8 in/out, int16 time weights and state) bit-exact with LiteRT BUILTIN_REF over sequences:
its state is a variable tensor kept across invocations (in place and prepared), zeroed at init and by reset()."""
from __future__ import annotations

import shutil

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

from edgekit.firmware import host_runtime as hr
from tests.firmware.opmodels import T, _aligned_buffers, build_graph, litert_sequence

STEPS = 12


def svdf_model(rng, batch: int, n_in: int, units: int, rank: int, memory: int, bias: bool = True) -> bytes:
    filters = units * rank
    tensors = [
        T((batch, n_in), "int8", 0.05, int(rng.integers(-20, 20))),
        T((filters, n_in), "int8", 0.02, 0, data=rng.integers(-127, 128, (filters, n_in))),
        T((filters, memory), "int16", 1.0 / 4096, 0, data=rng.integers(-3000, 3000, (filters, memory))),
        T((units,), "int32", 0.001, 0, data=rng.integers(-20000, 20000, (units,))) if bias else None,
        T((batch, memory * filters), "int16", 0.004, 0, name="svdf_state"),
        T((batch, units), "int8", float(rng.uniform(0.02, 0.08)), int(rng.integers(-128, -100))),
    ]
    present = [t for t in tensors if t is not None]
    idx = {id(t): i for i, t in enumerate(present)}
    inputs = [idx[id(t)] if t is not None else -1 for t in tensors[:5]]
    model = build_graph(present, [("SVDF", inputs, [idx[id(tensors[5])]], {"rank": rank})], [0], [idx[id(tensors[5])]])
    obj = schema.ModelT.InitFromPackedBuf(model, 0)
    obj.subgraphs[0].tensors[idx[id(tensors[4])]].isVariable = True
    builder = flatbuffers.Builder(1024)
    with _aligned_buffers():
        builder.Finish(obj.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())



CASES = [(1, 8, 3, 2, 4, True), (2, 5, 4, 1, 3, True), (1, 16, 2, 3, 6, False), (3, 7, 5, 2, 1, True)]


@pytest.mark.parametrize("optimize", [None, "balanced"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_svdf_is_bit_exact_over_a_sequence(case, optimize):
    rng = np.random.default_rng(100 + case)
    batch, n_in, units, rank, memory, bias = CASES[case]
    model = svdf_model(rng, batch, n_in, units, rank, memory, bias)
    xs = [rng.integers(-128, 128, (batch, n_in), dtype=np.int8) for _ in range(STEPS)]
    ref = litert_sequence(model, xs)
    if memory > 1:  # the reference carries the state: one frame repeated gives changing outputs
        repeated = litert_sequence(model, [xs[0]] * memory)
        assert len({r.tobytes() for r in repeated}) > 1
    rt = hr.HostRuntime(model, optimize=optimize)
    got = [rt.invoke([x])[0] for x in xs]
    differing = sum(int((r != g).sum()) for r, g in zip(ref, got))
    assert differing == 0, f"{differing} of {sum(r.size for r in ref)} elements differ over {STEPS} steps"
    assert rt.plan["variables_bytes"] == -(-batch * memory * units * rank * 2 // 16) * 16
    rt.reset()
    assert all(np.array_equal(rt.invoke([x])[0], r) for x, r in zip(xs[:3], ref))


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("qemu-system-arm") and shutil.which("arm-none-eabi-gcc")),
                    reason="qemu-system-arm and arm-none-eabi-gcc are needed")
def test_svdf_on_qemu_keeps_its_state_and_resets(tmp_path):
    from edgekit.firmware.boards import load_board
    from edgekit.firmware.generate import generate_firmware
    from edgekit.firmware.qemu import QemuSession

    rng = np.random.default_rng(7)
    model = svdf_model(rng, 1, 8, 3, 2, 4)
    xs = [rng.integers(-128, 128, (1, 8), dtype=np.int8) for _ in range(STEPS)]
    ref = litert_sequence(model, xs)
    result = generate_firmware(model, "mps2-an386", tmp_path / "fw", build=True)
    with QemuSession(load_board("mps2-an386"), result.elf, timeout_s=30) as qemu:
        got = [qemu.infer([x]).outputs[0].reshape(r.shape) for x, r in zip(xs, ref)]
        qemu.client.reset()
        again = [qemu.infer([x]).outputs[0].reshape(r.shape) for x, r in zip(xs[:3], ref)]
    assert sum(int((r != g).sum()) for r, g in zip(ref, got)) == 0
    assert all(np.array_equal(g, r) for g, r in zip(again, ref))
