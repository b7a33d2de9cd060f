"""Streaming models that need STRIDED_SLICE (helper h-shape's kernel) beside resource variables (this branch):
microWakeWord's hey_jarvis (tests/fixtures/zoo/pymicro_wakeword/) and a tiny CONCATENATION + STRIDED_SLICE streaming
convolution, bit-exact with LiteRT BUILTIN_REF over sequences with the state carried, on the host and on QEMU.

Add as tests/firmware/test_streaming_wakeword.py once the h-shape and h-state branches are merged. Checked on the
h-state branch with a throwaway STRIDED_SLICE kernel (not committed): all 5 tests passed, the QEMU one in 48 s."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from edgekit.firmware import host_runtime as hr
from tests.firmware.statemodels import streaming_conv_model

WAKEWORD = Path(__file__).resolve().parents[1] / "fixtures" / "zoo" / "pymicro_wakeword" / "hey_jarvis.tflite"
STEPS = 24  # invocations of 3 feature frames each: 72 frames (0.72 s of audio at 10 ms per frame)


def features(shape, n: int, seed: int = 5):
    """Deterministic int8 feature frames that vary smoothly in time (a real spectrogram is not white noise)."""
    rng = np.random.default_rng(seed)
    base = rng.integers(-128, 40, shape[1:], dtype=np.int16)
    return [np.clip(base + rng.integers(-30, 31, shape[1:]) + 8 * i, -128, 127).astype(np.int8).reshape(shape)
            for i in range(n)]


def litert_sequence(model: bytes, xs):
    """Every output of every step (BUILTIN_REF, one interpreter: the state carries over)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    i = it.get_input_details()[0]["index"]
    outs = []
    for x in xs:
        it.set_tensor(i, x)
        it.invoke()
        outs.append([it.get_tensor(d["index"]).copy() for d in it.get_output_details()])
    return outs


def with_state_outputs(model: bytes) -> bytes:
    """The model with every value it assigns to a variable (the new ring-buffer contents) and the logit before
    LOGISTIC as extra graph outputs: the wake-word probability alone is 0 for most inputs, the state is not."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    obj = schema.ModelT.InitFromPackedBuf(model, 0)
    main = obj.subgraphs[0]
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    code = lambda op: names[max(obj.operatorCodes[op.opcodeIndex].builtinCode,  # noqa: E731
                                obj.operatorCodes[op.opcodeIndex].deprecatedBuiltinCode)]
    extra = [int(op.inputs[1]) for op in main.operators if code(op) == "ASSIGN_VARIABLE"]
    extra += [int(op.inputs[0]) for op in main.operators if code(op) == "LOGISTIC"]
    main.outputs = list(main.outputs) + extra
    builder = flatbuffers.Builder(1 << 16)
    builder.Finish(obj.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def differing_steps(ref, got):
    return [k for k, (r, g) in enumerate(zip(ref, got)) if any(not np.array_equal(a, b) for a, b in zip(r, g))]


@pytest.fixture(scope="module")
def wakeword() -> bytes:
    return with_state_outputs(WAKEWORD.read_bytes())


@pytest.fixture(scope="module")
def streaming_conv() -> bytes:
    return streaming_conv_model()


@pytest.mark.parametrize("optimize", [None, "balanced"])
def test_wakeword_host_runtime_bit_exact_over_a_sequence(wakeword, optimize):
    rt = hr.HostRuntime(wakeword, optimize=optimize)
    xs = features(rt.inputs[0]["shape"], STEPS)
    ref = litert_sequence(wakeword, xs)
    assert len({r[-1].tobytes() for r in ref}) > 1, "the reference logit never changes: the test would prove nothing"
    got = [rt.invoke([x]) for x in xs]
    assert not differing_steps(ref, got), f"outputs or state differ at steps {differing_steps(ref, got)} of {STEPS}"
    rt.reset()
    assert not differing_steps(ref[:4], [rt.invoke([x]) for x in xs[:4]])
    assert rt.plan["variables_bytes"] >= 6 * 16


@pytest.mark.parametrize("optimize", [None, "balanced"])
def test_streaming_conv_host_runtime_bit_exact_over_a_sequence(streaming_conv, optimize):
    rt = hr.HostRuntime(streaming_conv, optimize=optimize)
    xs = features(rt.inputs[0]["shape"], 12, seed=2)
    ref = litert_sequence(streaming_conv, xs)
    assert not differing_steps(ref, [rt.invoke([x]) for x in xs])


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("qemu-system-arm") and shutil.which("arm-none-eabi-gcc")),
                    reason="qemu-system-arm and arm-none-eabi-gcc are needed")
def test_wakeword_on_qemu_bit_exact_over_a_sequence(wakeword, tmp_path):
    from edgekit.firmware.boards import load_board
    from edgekit.firmware.generate import generate_firmware
    from edgekit.firmware.qemu import QemuSession

    result = generate_firmware(wakeword, "mps2-an386", tmp_path / "fw", build=True)
    xs = features((1, 3, 40), STEPS)
    ref = litert_sequence(wakeword, xs)
    with QemuSession(load_board("mps2-an386"), result.elf, timeout_s=60) as qemu:
        got = [[o.reshape(r.shape) for o, r in zip(qemu.infer([x]).outputs, rs)] for x, rs in zip(xs, ref)]
    assert not differing_steps(ref, got), f"device outputs or state differ at steps {differing_steps(ref, got)}"
