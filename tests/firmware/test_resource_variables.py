"""Resource variables (VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE + a CALL_ONCE init subgraph): state kept
across invocations, bit-exact with LiteRT BUILTIN_REF over sequences, on the host (in place, prepared, sanitized)
and on QEMU mps2-an386; reset; the reader's and support check's messages for what is not supported."""
from __future__ import annotations

import shutil

import flatbuffers
import numpy as np
import pytest

from edgekit.errors import EdgekitError
from edgekit.firmware import host_runtime as hr
from edgekit.firmware.support import check_support
from edgekit.tflite_graph import read_graph
from tests.firmware.opmodels import litert_sequence
from tests.firmware.statemodels import recurrent_mean_model

STEPS = 16


@pytest.fixture(scope="module")
def recurrent() -> bytes:
    return recurrent_mean_model()


def frames(model: bytes, n: int, seed: int = 3):
    rt = hr.HostRuntime(model)
    spec = rt.inputs[0]
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, spec["shape"], dtype=np.int8) for _ in range(n)]



def test_the_reference_really_carries_state(recurrent):
    """Guard for the tests below: the same frame gives different outputs at different steps."""
    x = frames(recurrent, 1)[0]
    outs = litert_sequence(recurrent, [x] * 4)
    assert any(not np.array_equal(outs[0], o) for o in outs[1:])


@pytest.mark.parametrize("optimize", [None, "balanced", "ram"])
def test_host_runtime_is_bit_exact_over_a_sequence(recurrent, optimize):
    xs = frames(recurrent, STEPS)
    ref = litert_sequence(recurrent, xs)
    rt = hr.HostRuntime(recurrent, optimize=optimize)
    got = [rt.invoke([x])[0] for x in xs]
    differing = sum(int((r != g).sum()) for r, g in zip(ref, got))
    assert differing == 0, f"{differing} of {sum(r.size for r in ref)} output elements differ over {STEPS} steps"


def test_variables_are_arena_buffers_alive_over_the_whole_graph(recurrent):
    rt = hr.HostRuntime(recurrent)
    plan = rt.plan
    assert plan["variables_bytes"] == 2 * 16  # two 4-byte int8 variables, each padded to 16 bytes
    assert plan["variables_bytes"] <= plan["arena_bytes"]
    ops = len(rt.op_names)
    names = hr._tensor_names(recurrent)
    handles = [t for t in plan["tensors"] if names.get(t["index"], "").startswith("Variable")]
    assert len(handles) == 2
    assert all(t["first_op"] == -1 and t["last_op"] == ops and t["bytes"] == 4 for t in handles)


@pytest.mark.parametrize("optimize", [None, "balanced"])
def test_reset_starts_the_sequence_again(recurrent, optimize):
    xs = frames(recurrent, 6)
    ref = litert_sequence(recurrent, xs)
    rt = hr.HostRuntime(recurrent, optimize=optimize)
    for x in frames(recurrent, 5, seed=9):
        rt.invoke([x])
    rt.reset()
    assert all(np.array_equal(rt.invoke([x])[0], r) for x, r in zip(xs, ref))


def test_sanitized_driver_replays_the_sequence(recurrent):
    xs = frames(recurrent, 10)
    ref = litert_sequence(recurrent, xs)
    rt = hr.HostRuntime(recurrent, sanitize=True)
    assert rt.plan["variables_bytes"] == 32
    assert all(np.array_equal(rt.invoke([x])[0], r) for x, r in zip(xs, ref))


def test_support_accepts_a_call_once_init_subgraph_and_rejects_other_control_flow(recurrent):
    assert check_support(read_graph(recurrent)).ok
    from ai_edge_litert import schema_py_generated as schema

    obj = schema.ModelT.InitFromPackedBuf(recurrent, 0)
    obj.subgraphs.append(obj.subgraphs[1])  # a third subgraph: what IF / WHILE models have
    model = pack(obj)
    report = check_support(read_graph(model))
    rejected = [o for o in report.ops if not o.supported]
    assert [o.op for o in rejected] == ["SUBGRAPHS"] and "IF / WHILE" in rejected[0].reason
    with pytest.raises(EdgekitError, match="subgraphs other than a CALL_ONCE init subgraph"):
        hr.HostRuntime(model)


def pack(obj) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.Finish(obj.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def edited(model: bytes, edit) -> bytes:
    from ai_edge_litert import schema_py_generated as schema

    obj = schema.ModelT.InitFromPackedBuf(model, 0)
    edit(obj, schema)
    return pack(obj)


def op_name(obj, schema, op) -> str:
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    code = obj.operatorCodes[op.opcodeIndex]
    return names[max(code.builtinCode, code.deprecatedBuiltinCode)]


def test_reader_rejects_an_init_subgraph_that_computes(recurrent):
    def edit(obj, schema):
        main, init = obj.subgraphs
        reshape = next(op for op in main.operators if op_name(obj, schema, op) == "RESHAPE")
        extra = schema.OperatorT()
        extra.opcodeIndex, extra.inputs, extra.outputs = reshape.opcodeIndex, [1], [3]
        init.operators.append(extra)

    with pytest.raises(EdgekitError, match="init subgraph computes values"):
        hr.HostRuntime(edited(recurrent, edit))


def test_reader_rejects_two_handles_of_one_variable(recurrent):
    def edit(obj, schema):
        handles = [op for op in obj.subgraphs[0].operators if op_name(obj, schema, op) == "VAR_HANDLE"]
        handles[1].builtinOptions.sharedName = handles[0].builtinOptions.sharedName

    with pytest.raises(EdgekitError, match="name the same variable"):
        hr.HostRuntime(edited(recurrent, edit))


def test_reader_rejects_variables_without_call_once(recurrent):
    def edit(obj, schema):
        main = obj.subgraphs[0]
        main.operators = [op for op in main.operators if op_name(obj, schema, op) != "CALL_ONCE"]
        obj.subgraphs = obj.subgraphs[:1]

    with pytest.raises(EdgekitError, match="without a CALL_ONCE init subgraph"):
        hr.HostRuntime(edited(recurrent, edit))


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("qemu-system-arm") and shutil.which("arm-none-eabi-gcc")),
                    reason="qemu-system-arm and arm-none-eabi-gcc are needed")
def test_qemu_firmware_keeps_state_across_inferences_and_resets(recurrent, tmp_path):
    from edgekit.firmware.boards import load_board
    from edgekit.firmware.generate import generate_firmware
    from edgekit.firmware.qemu import QemuSession

    result = generate_firmware(recurrent, "mps2-an386", tmp_path / "fw", build=True)
    info = result.info.model_dump()
    assert info["plan"]["variables_bytes"] == 32 and info["ram"]["runtime"]["variables"] == 32
    xs = frames(recurrent, 12)
    ref = litert_sequence(recurrent, xs)
    with QemuSession(load_board("mps2-an386"), result.elf, timeout_s=30) as qemu:
        got = [qemu.infer([x]).outputs[0].reshape(r.shape) for x, r in zip(xs, ref)]
        qemu.client.reset()
        again = [qemu.infer([x]).outputs[0].reshape(r.shape) for x, r in zip(xs[:3], ref)]
    differing = sum(int((r != g).sum()) for r, g in zip(ref, got))
    assert differing == 0, f"{differing} output elements differ on the device over 12 inferences"
    assert all(np.array_equal(g, r) for g, r in zip(again, ref))
