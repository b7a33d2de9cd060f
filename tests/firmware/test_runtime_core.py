"""The edgekit C runtime core (reader, planner, interpreter) on the host: whole-model bit-exactness against
LiteRT BUILTIN_REF, corrupt and truncated models, unsupported operators, the C API's memory and hook contracts."""
from __future__ import annotations

import ctypes
import subprocess
import sys

import numpy as np
import pytest

from edgekit.errors import CalibrationDataError, InvalidModelError, UnsupportedOpError
from edgekit.firmware import host_runtime as hr
from tests.conftest import REPO
from tests.firmware.opmodels import T, build_graph, build_model, random_input, reference

sys.path.insert(0, str(REPO / "firmware" / "fuzz"))
from make_corpus import graph_models, single_op_models  # noqa: E402

MLPERF_MODELS = ["kws_ref_model_int8", "ic_resnet8_int8", "ad_autoencoder_int8"]
EK_OK, EK_ERR_MODEL, EK_ERR_UNSUPPORTED, EK_ERR_MEMORY = 0, 1, 2, 5


def assert_bit_exact(model: bytes, seed: int, runs: int = 2) -> None:
    rt = hr.HostRuntime(model)
    rng = np.random.default_rng(seed)
    for _ in range(runs):
        inputs = random_input(model, rng)
        ours, ref = rt.invoke(inputs), reference(model, inputs)
        assert len(ours) == len(ref)
        for o, r in zip(ours, ref):
            assert o.dtype == r.dtype and o.shape == r.shape
            diff = int(np.count_nonzero(o != r))
            assert diff == 0, f"{diff} of {o.size} output elements differ from BUILTIN_REF (max |d| {np.abs(o.astype(np.int64) - r).max()})"


@pytest.fixture(scope="module")
def demo_int8(demo_quantized) -> bytes:
    """The demo model as `edgekit quantize` produces it (quantized once per session, tests/conftest.py)."""
    return (demo_quantized / "model_int8.tflite").read_bytes()


# --- bit-exactness ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", MLPERF_MODELS)
def test_mlperf_int8_model_is_bit_exact_with_builtin_ref(mlperf, name):
    assert_bit_exact((mlperf / f"{name}.tflite").read_bytes(), seed=7)


def test_demo_int8_model_is_bit_exact_with_builtin_ref(demo_int8):
    assert_bit_exact(demo_int8, seed=11, runs=3)


# SUM: BUILTIN_REF's int8 SUM reads int8 as uint8; tests/firmware/test_kernels_reduce.py checks SUM against TFLM
@pytest.mark.parametrize("name", sorted(set(single_op_models()) - {"sum"}))
def test_seed_models_are_bit_exact_with_builtin_ref(name):
    """One small model per operator plus float-I/O and RESHAPE-chain graphs (the fuzzer's seeds)."""
    assert_bit_exact(single_op_models()[name], seed=3)


def test_float_io_model_takes_float_inputs_and_gives_float_outputs():
    model = graph_models(np.random.default_rng(0))["float_io_fc"]
    rt = hr.HostRuntime(model)
    assert rt.inputs[0]["dtype"] == np.float32 and rt.outputs[0]["dtype"] == np.float32
    assert rt.op_names == ["QUANTIZE", "FULLY_CONNECTED", "DEQUANTIZE"]
    assert_bit_exact(model, seed=5, runs=3)


def test_sanitized_build_gives_the_same_outputs(mlperf):
    model = (mlperf / "kws_ref_model_int8.tflite").read_bytes()
    inputs = random_input(model, np.random.default_rng(1))
    plain, sanitized = hr.HostRuntime(model), hr.HostRuntime(model, sanitize=True)
    assert plain.plan == sanitized.plan
    np.testing.assert_array_equal(plain.invoke(inputs)[0], sanitized.invoke(inputs)[0])


def test_wrong_inputs_are_reported_all_at_once(mlperf):
    rt = hr.HostRuntime((mlperf / "kws_ref_model_int8.tflite").read_bytes())
    with pytest.raises(CalibrationDataError, match="shape"):
        rt.invoke([np.zeros((1, 10, 49, 1), np.int8)])
    with pytest.raises(CalibrationDataError, match="dtype"):
        rt.invoke([np.zeros((1, 49, 10, 1), np.float32)])


# --- bad models ---------------------------------------------------------------------------------------

def _load_outcome(model: bytes):
    """'ok' with the outputs for zero inputs, or the error class name; anything else (a crash) fails the test."""
    try:
        rt = hr.HostRuntime(model)
    except (InvalidModelError, UnsupportedOpError) as exc:
        assert str(exc).strip(), "an error must carry a message"
        return type(exc).__name__
    return rt.invoke([np.zeros(s["shape"], s["dtype"]) for s in rt.inputs])


def test_every_truncation_of_a_small_model_is_a_clean_error():
    model = single_op_models()["conv_2d"]
    full = _load_outcome(model)
    for n in range(len(model)):
        outcome = _load_outcome(model[:n])
        if isinstance(outcome, str):
            continue
        # a cut that only drops trailing padding leaves a valid model: it must then behave identically
        assert all(np.array_equal(a, b) for a, b in zip(outcome, full)), f"truncated to {n} bytes runs differently"


def test_truncations_of_a_real_model_in_every_region_are_clean_errors(mlperf):
    model = (mlperf / "kws_ref_model_int8.tflite").read_bytes()
    lengths = sorted(set(range(0, 64)) | set(range(64, len(model), 97)) | {len(model) - k for k in range(1, 32)})
    messages = set()
    for n in lengths:
        with pytest.raises(InvalidModelError) as info:
            hr.HostRuntime(model[:n])
        messages.add(str(info.value).split(":", 1)[-1].split("\n")[0].strip())
    assert any("truncated" in m for m in messages)
    assert any("identifier" in m or "too small" in m for m in messages)


@pytest.mark.parametrize("seed", range(4))
def test_flipped_bytes_never_crash(mlperf, seed):
    """Random byte flips: a clean error or a run, never a crash (the fuzzer does this under ASan at scale)."""
    rng = np.random.default_rng(seed)
    base = [single_op_models()["depthwise_conv_2d"], (mlperf / "kws_ref_model_int8.tflite").read_bytes()]
    kinds = set()
    for _ in range(60):
        model = bytearray(base[int(rng.integers(len(base)))])
        for pos in rng.integers(0, len(model), size=int(rng.integers(1, 6))):
            model[pos] = int(rng.integers(256))
        outcome = _load_outcome(bytes(model))
        kinds.add(outcome if isinstance(outcome, str) else "ok")
    assert kinds  # every mutant finished without taking the process down


def test_bad_header_fields_are_named():
    model = bytearray(single_op_models()["add"])
    with pytest.raises(InvalidModelError, match="TFL3"):
        hr.HostRuntime(bytes(model[:4] + b"XXXX" + model[8:]))
    with pytest.raises(InvalidModelError, match="too small"):
        hr.HostRuntime(b"\x00" * 7)


def test_unsupported_ops_are_listed_all_at_once_with_their_location():
    a, b = T((1, 8), scale=0.1), T((1, 8), scale=0.1)
    tensors = [a, b, T((1, 8), scale=0.1), T((1, 8), scale=0.1), T((1, 8), scale=0.1), T((1, 8), scale=0.1)]
    ops = [("FLOOR_MOD", [0, 1], [2], None), ("ADD", [2, 1], [3], None), ("CUMSUM", [3], [4], None), ("LOCAL_RESPONSE_NORMALIZATION", [4], [5], None)]
    model = build_graph(tensors, ops, [0, 1], [5])
    with pytest.raises(UnsupportedOpError) as info:
        hr.HostRuntime(model)
    rejected = [(o.op, o.location) for o in info.value.report.rejected]
    assert rejected == [("FLOOR_MOD", "op #0"), ("CUMSUM", "op #2"), ("LOCAL_RESPONSE_NORMALIZATION", "op #3")]
    text = str(info.value)
    assert "3 operator(s)" in text and "FLOOR_MOD at op #0" in text and "LOCAL_RESPONSE_NORMALIZATION at op #3" in text


def test_more_than_one_subgraph_is_rejected_with_a_clear_message():
    from ai_edge_litert import schema_py_generated as schema
    import flatbuffers

    obj = schema.ModelT.InitFromPackedBuf(single_op_models()["add"], 0)
    obj.subgraphs.append(obj.subgraphs[0])
    builder = flatbuffers.Builder(1024)
    builder.Finish(obj.Pack(builder), file_identifier=b"TFL3")
    with pytest.raises(InvalidModelError, match="subgraphs other than a CALL_ONCE init subgraph"):
        hr.HostRuntime(bytes(builder.Output()))


def test_constant_data_of_the_wrong_size_is_rejected():
    from ai_edge_litert import schema_py_generated as schema
    import flatbuffers

    obj = schema.ModelT.InitFromPackedBuf(single_op_models()["fully_connected"], 0)
    weights = next(b for b in obj.buffers if b.data is not None and len(b.data) == 128)
    weights.data = weights.data[:100]
    builder = flatbuffers.Builder(1024)
    builder.Finish(obj.Pack(builder), file_identifier=b"TFL3")
    with pytest.raises(InvalidModelError, match="data size does not match"):
        hr.HostRuntime(bytes(builder.Output()))


def test_per_channel_scale_count_must_match_the_channels():
    w = np.ones((8, 16), np.int8)
    model = build_model("FULLY_CONNECTED", [T((1, 16)), T((8, 16), scale=[0.1] * 5, data=w), None], [T((1, 8))])
    with pytest.raises(InvalidModelError, match="per-channel scale count"):
        hr.HostRuntime(model)


# --- the C API directly -------------------------------------------------------------------------------

class _Api:
    """ek_init and friends on caller-chosen buffers (what firmware does), through ctypes."""

    def __init__(self, model: bytes, offset: int = 0):
        self.lib = hr.library()
        raw = np.zeros(len(model) + 32, np.uint8)
        start = (-raw.ctypes.data) % 16 + offset
        self.model = raw[start:start + len(model)]
        self.model[:] = np.frombuffer(model, np.uint8)
        self.rt = ctypes.create_string_buffer(self.lib.ek_host_sizeof_runtime())

    def init(self, state_len: int, arena_len: int) -> int:
        self.state, self.arena = np.zeros(state_len + 16, np.uint8), np.zeros(arena_len + 16, np.uint8)
        s = self.state.ctypes.data + (-self.state.ctypes.data) % 16
        a = self.arena.ctypes.data + (-self.arena.ctypes.data) % 16
        return self.lib.ek_init(self.rt, self.model.ctypes.data, len(self.model), s if state_len else None, state_len,
                                a if arena_len else None, arena_len)

    def info(self) -> dict:
        values = (ctypes.c_int64 * 7)()
        self.lib.ek_host_info(self.rt, values)
        return dict(zip(("state", "arena", "persistent", "tensors", "ops", "ready", "state_with_plan"), list(values)))

    def error(self):
        e = self.lib.ek_last_error(self.rt)
        return e.status, e.op_index, e.message.decode()


def _discover(api: "_Api") -> tuple[int, int, int]:
    """The size-discovery loop firmware tools run (no arena): (state that let planning run, state_required, arena)."""
    assert api.init(0, 0) == EK_ERR_MEMORY and "state" in api.error()[2]
    state = api.info()["state"]
    while api.init(state, 0) == EK_ERR_MEMORY and api.info()["state"] > state:
        state = api.info()["state"]
    return state, api.info()["state"], api.info()["arena"]


def test_sizes_are_learned_from_memory_errors_and_exact_sizes_work(mlperf):
    api = _Api((mlperf / "ic_resnet8_int8.tflite").read_bytes())
    planning_state, state, arena = _discover(api)
    assert arena > 0 and "arena" in api.error()[2]
    assert state <= planning_state  # the plan + planner work go to the arena once it is given
    assert api.init(state, arena - 16) == EK_ERR_MEMORY
    assert api.init(state - 8, arena) == EK_ERR_MEMORY and "state" in api.error()[2]
    assert api.info()["state"] == state and api.info()["arena"] == arena
    assert api.init(state, arena) == EK_OK and api.info()["ready"] == 1
    sizes = (ctypes.c_size_t(), ctypes.c_size_t())
    err = hr._Error()
    work = np.zeros(planning_state, np.uint8)
    assert api.lib.ek_required_bytes(api.model.ctypes.data, len(api.model), work.ctypes.data, planning_state,
                                     ctypes.byref(sizes[0]), ctypes.byref(sizes[1]), ctypes.byref(err)) == EK_OK
    assert (sizes[0].value, sizes[1].value) == (state, arena)
    assert api.lib.ek_required_bytes(api.model.ctypes.data, len(api.model), work.ctypes.data, planning_state - 8,
                                     ctypes.byref(sizes[0]), ctypes.byref(sizes[1]), ctypes.byref(err)) == EK_ERR_MEMORY
    assert sizes[0].value == planning_state


@pytest.mark.parametrize("name", sorted(MLPERF_MODELS))
def test_state_excludes_the_init_memory_and_sizes_do_not_depend_on_the_buffers_given(mlperf, name):
    """For every MLPerf model the arena can hold the plan + planner work, so the state is the fixed part (tensor
    and op records: what init asks for before reading the graph when the arena can hold the plan) + kernel data
    only; a bigger arena or state changes neither reported size (host and device compute the same sizes)."""
    model = (mlperf / f"{name}.tflite").read_bytes()
    api = _Api(model)
    planning_state, state, arena = _discover(api)
    persistent = api.info()["persistent"]
    assert api.init(0, 1 << 20) == EK_ERR_MEMORY and "state" in api.error()[2]
    fixed = api.info()["state"]
    assert state == fixed + persistent and state <= planning_state
    for state_len, arena_len in ((state, arena), (state + 4096, arena), (state, arena + 4096),
                                 (planning_state, 4 * arena)):
        assert api.init(state_len, arena_len) == EK_OK
        assert (api.info()["state"], api.info()["arena"]) == (state, arena)
    rt = hr.HostRuntime(model)
    assert (rt.plan["state_bytes"], rt.plan["arena_bytes"]) == (state, arena)


def test_init_memory_stays_in_the_state_when_the_arena_is_too_small_for_it():
    """A model whose activations are smaller than its plan + planner work keeps the plan in the state: the state
    then needs the planning size, whatever arena is given, and the exact sizes still work."""
    model = build_model("FULLY_CONNECTED", [T((1, 16)), T((8, 16), data=np.ones((8, 16), np.int8)), None],
                        [T((1, 8))])
    api = _Api(model)
    planning_state, state, arena = _discover(api)
    assert state == planning_state and 0 < arena < 256
    assert api.init(state - 8, arena) == EK_ERR_MEMORY and api.info()["state"] == state
    assert api.init(state - 8, arena + 4096) == EK_ERR_MEMORY and api.info()["state"] == state
    assert api.init(state, arena + 4096) == EK_OK and api.info()["state"] == state
    assert api.init(state, arena) == EK_OK and api.info()["ready"] == 1
    rt = hr.HostRuntime(model)
    x = random_input(model, np.random.default_rng(3))
    np.testing.assert_array_equal(rt.invoke(x)[0], reference(model, x)[0])
    assert (rt.plan["state_bytes"], rt.plan["arena_bytes"]) == (state, arena)


def test_plan_shares_the_persistent_space_unless_state_with_plan_is_given(mlperf):
    """With exactly state_required bytes the plan does not survive init (pointers NULL after init); with
    state_with_plan bytes it stays readable and equals the plan the host binding reports."""
    model = (mlperf / "ic_resnet8_int8.tflite").read_bytes()
    api = _Api(model)
    _, state, arena = _discover(api)
    with_plan = api.info()["state_with_plan"]
    assert with_plan > state
    assert api.init(state, arena) == EK_OK
    assert not api.lib.ek_host_tensor_plan(api.rt) and not api.lib.ek_host_scratch_plan(api.rt)
    assert api.init(with_plan, arena) == EK_OK and api.info()["state"] == state
    tp = api.lib.ek_host_tensor_plan(api.rt)
    assert tp and api.init(with_plan - 8, arena) == EK_OK and not api.lib.ek_host_tensor_plan(api.rt)
    assert api.init(with_plan, arena) == EK_OK
    tp = api.lib.ek_host_tensor_plan(api.rt)
    planned = {i: tp[i].offset for i in range(api.info()["tensors"]) if tp[i].offset >= 0}
    host_plan = hr.HostRuntime(model).plan
    assert planned == {t["index"]: t["offset"] for t in host_plan["tensors"]}
    assert host_plan["state_bytes"] == state


def _strided_conv(stride: int) -> bytes:
    w = np.arange(2 * 3 * 3 * 2, dtype=np.int8).reshape(2, 3, 3, 2) - 9
    bias = T((2,), dtype="int32", scale=0.05 * 0.05, data=np.array([7, -3], np.int32))
    return build_model("CONV_2D", [T((1, 5, 5, 2)), T((2, 3, 3, 2), data=w), bias], [T((1, 3, 1, 2))],
                       {"padding": "VALID", "stride_w": stride, "stride_h": 1})


def test_options_beyond_16_bits_are_rejected_and_the_largest_16_bit_ones_run_bit_exact():
    """ek_op_params holds strides, dilations, filter sizes, depth multipliers and axes in 16 bits: the reader
    rejects a wider value by name instead of truncating it; 32767 still works."""
    assert_bit_exact(_strided_conv(32767), seed=5)
    api = _Api(_strided_conv(32768))
    assert api.init(1 << 16, 1 << 16) == EK_ERR_UNSUPPORTED
    status, op_index, message = api.error()
    assert (status, op_index) == (EK_ERR_UNSUPPORTED, 0) and "outside -32768..32767" in message and "stride" in message


def test_misaligned_model_is_reported_not_faulted_on(mlperf):
    api = _Api((mlperf / "kws_ref_model_int8.tflite").read_bytes(), offset=1)
    assert api.init(1 << 20, 1 << 20) == EK_ERR_MODEL
    assert "aligned" in api.error()[2]


def test_op_hook_brackets_every_op_in_order(mlperf):
    model = (mlperf / "kws_ref_model_int8.tflite").read_bytes()
    rt = hr.HostRuntime(model)
    backend = rt._backend
    calls = []
    hook_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_int)
    hook = hook_type(lambda user, index, opcode, phase: calls.append((index, opcode, phase)))
    backend.lib.ek_set_op_hook.argtypes = [ctypes.c_void_p, hook_type, ctypes.c_void_p]
    backend.lib.ek_set_op_hook(backend.rt, hook, None)
    rt.invoke(random_input(model, np.random.default_rng(0)))
    codes = hr.op_codes(model)
    assert calls == [(i, codes[i], phase) for i in range(len(codes)) for phase in (0, 1)]


def test_model_opcodes_lists_every_op_without_kernels_or_state(mlperf):
    codes = hr.op_codes((mlperf / "kws_ref_model_int8.tflite").read_bytes())
    names = [hr.op_name(c) for c in codes]
    assert names[0] == "CONV_2D" and names[-1] == "SOFTMAX" and "DEPTHWISE_CONV_2D" in names
    assert hr.op_name(32) == "CUSTOM" and hr.op_name(117) == "HARD_SWISH" and hr.op_name(100000) == "UNKNOWN"


def test_runtime_sources_are_warning_free_c99_for_host_and_cortex_m(tmp_path):
    """-Wall -Wextra -Werror with gcc, and with arm-none-eabi-gcc for Cortex-M4 when installed."""
    done = subprocess.run(["make", "-s", "-C", str(REPO / "firmware" / "runtime"), "check"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def _with_external_weights(model: bytes, *, beyond: int = 0) -> bytes:
    """The FC weights moved out of the flatbuffer into data appended after it (Buffer.offset / size)."""
    from ai_edge_litert import schema_py_generated as schema
    import flatbuffers

    obj = schema.ModelT.InitFromPackedBuf(model, 0)
    weights = next(b for b in obj.buffers if b.data is not None and len(b.data) == 128)
    data = bytes(weights.data)
    weights.data = None
    weights.offset, weights.size = 0x1122334455667788, len(data)  # placeholder, patched below
    builder = flatbuffers.Builder(1024)
    builder.Finish(obj.Pack(builder), file_identifier=b"TFL3")
    body = bytearray(builder.Output())
    start = (len(body) + 15) // 16 * 16
    placeholder = (0x1122334455667788).to_bytes(8, "little")
    assert body.count(placeholder) == 1
    body[body.index(placeholder):body.index(placeholder) + 8] = (start + beyond).to_bytes(8, "little")
    return bytes(body) + b"\0" * (start - len(body)) + data


def test_external_buffer_data_is_read_in_bounds():
    model = single_op_models()["fully_connected"]
    x = random_input(model, np.random.default_rng(0))
    external = _with_external_weights(model)
    np.testing.assert_array_equal(hr.HostRuntime(external).invoke(x)[0], hr.HostRuntime(model).invoke(x)[0])
    with pytest.raises(InvalidModelError, match="beyond the end"):
        hr.HostRuntime(_with_external_weights(model, beyond=16))
