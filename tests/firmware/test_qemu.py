"""Real boots in qemu-system-arm: the self-test firmware on every QEMU board, the protocol over the emulated
UART (socket and pty), hung / silent / garbling / faulting firmware, and the model firmware (firmware/app/main.c
with the edgekit runtime) bit-exact against LiteRT BUILTIN_REF."""
from __future__ import annotations

import os
import shutil
import signal
import time
import zlib
from pathlib import Path

import numpy as np
import psutil
import pytest

from edgekit.errors import DeviceError, UserError
from edgekit.firmware import boards as B
from edgekit.firmware.protocol import DeviceClient
from edgekit.firmware.qemu import QemuProcess, QemuSession

pytestmark = pytest.mark.skipif(not (shutil.which("qemu-system-arm") and shutil.which("arm-none-eabi-gcc")),
                                reason="qemu-system-arm and arm-none-eabi-gcc are needed (apt-get install "
                                       "qemu-system-arm gcc-arm-none-eabi libnewlib-arm-none-eabi)")

QEMU_BOARDS = ["mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547"]


def selftest_input(loops=10, ops=1, deep_stack=0, action=0) -> np.ndarray:
    x = np.arange(16, dtype=np.int8).reshape(1, 16)
    x[0, :4] = np.frombuffer(np.uint32(loops).tobytes(), dtype=np.int8)
    x[0, 4], x[0, 5], x[0, 6] = ops, deep_stack, action
    return x


def qemu_children():
    return [p for p in psutil.Process().children(recursive=True) if "qemu-system" in (p.name() or "")]


@pytest.mark.parametrize("name", QEMU_BOARDS)
def test_selftest_boots_and_talks_on_every_qemu_board(selftest, name):
    board = B.load_board(name)
    with QemuSession(board, selftest(name), boot_timeout_s=10, timeout_s=10) as qemu:
        info = qemu.info
        assert (info.board, info.protocol_version, info.ready, info.semihosting) == (name, 1, True, True)
        assert info.cpu_hz == board.firmware_clock_hz
        assert not info.cycles_available  # DWT CYCCNT is not modelled by QEMU: reported unavailable
        assert 0 < info.stack_used < info.stack_bytes <= board.stack_bytes  # minus the MPU guard on ARMv7-M
        for size in (0, 1, 100, 512):
            payload = bytes(range(256)) * 2
            assert qemu.client.echo(payload[:size]) == payload[:size]
        x = selftest_input()
        result = qemu.infer([x])
        np.testing.assert_array_equal(result.outputs[0], x ^ np.int8(0x5A))
        assert result.cycles is None and result.op_cycles == []
        print(f"{name}: booted and answered HELLO in {qemu.boot_s * 1000:.0f} ms")
    assert not qemu.qemu.alive()


def test_stack_high_water_mark_is_measured(selftest):
    with QemuSession(B.load_board("mps2-an386"), selftest("mps2-an386")) as qemu:
        shallow = qemu.infer([selftest_input()]).stack_used
        deep = qemu.infer([selftest_input(deep_stack=1)]).stack_used
    assert deep >= 4096 > shallow  # the 4 KiB local array shows up in the painted stack


def test_device_errors_are_reported_clearly(selftest):
    with QemuSession(B.load_board("mps2-an386"), selftest("mps2-an386"), timeout_s=5) as qemu:
        with pytest.raises(DeviceError, match="TOO_LONG"):
            qemu.client.echo(bytes(513))
        with pytest.raises(DeviceError, match="loop count must be >= 1"):
            qemu.infer([selftest_input(loops=0)])
        with pytest.raises(UserError, match="dtype uint8"):
            qemu.infer([np.zeros((1, 16), np.uint8)])
        assert qemu.client.echo(b"still alive") == b"still alive"


def test_silent_firmware_fails_within_the_timeout_and_qemu_is_reaped(selftest):
    start = time.monotonic()
    with pytest.raises(DeviceError) as exc:
        QemuSession(B.load_board("mps2-an386"), selftest("mps2-an386", "silent"), boot_timeout_s=2)
    assert time.monotonic() - start < 8
    assert "did not start serving (no BOOT frame within 2.0 s)" in str(exc.value)
    assert "QEMU (pid" in str(exc.value) and "still running" in str(exc.value)
    assert qemu_children() == []


def test_hang_mid_inference_times_out(selftest):
    with QemuSession(B.load_board("mps2-an386"), selftest("mps2-an386"), timeout_s=2) as qemu:
        start = time.monotonic()
        with pytest.raises(DeviceError, match=r"no RESULT reply to INFER within 2\.0 s"):
            qemu.infer([selftest_input(action=1)])
        assert time.monotonic() - start < 5
        process = qemu.qemu.process
    assert process.poll() is not None and qemu_children() == []


def test_garbled_reply_is_a_clear_error(selftest):
    board = B.load_board("mps2-an386")
    with QemuProcess(board, selftest("mps2-an386", "garble")) as qemu:
        client = DeviceClient(qemu.transport, timeout_s=5, context=qemu.describe)
        assert client.wait_boot(5) == "mps2-an386"
        with pytest.raises(DeviceError) as exc:
            client.hello()
    text = str(exc.value)
    assert "garbled reply to HELLO: payload CRC-32 mismatch in a INFO frame" in text
    assert "eb 90" in text  # the received bytes are shown


def test_fault_is_reported_with_registers_and_qemu_exits(selftest):
    with QemuSession(B.load_board("mps2-an505"), selftest("mps2-an505"), timeout_s=5) as qemu:
        with pytest.raises(DeviceError) as exc:
            qemu.infer([selftest_input(action=2)])
        assert qemu.qemu.wait_exit(5) == 3  # semihosting exit code EK_EXIT_FAULT
    text = str(exc.value)
    assert "device reported FAULT" in text and "HardFault" in text and "pc=0x" in text and "bfar=0xf0000000" in text


@pytest.mark.parametrize("name, evidence", [
    ("mps2-an505", "cfsr=0x00100000"),   # ARMv8-M: MSPLIM catches it (UsageFault STKOF)
    ("mps2-an386", "mmfar=0x20000000"),  # ARMv7-M: the MPU guard region at the bottom of RAM
    ("mps2-an500", "mmfar=0x20000000"),
])
def test_stack_overflow_is_caught_not_silent(selftest, name, evidence):
    with QemuSession(B.load_board(name), selftest(name), timeout_s=5) as qemu:
        with pytest.raises(DeviceError) as exc:
            qemu.infer([selftest_input(action=3)])
        assert qemu.qemu.wait_exit(5) == 3
    assert "FAULT" in str(exc.value) and "stack overflow: no exception frame" in str(exc.value)
    assert evidence in str(exc.value)


def test_uart_over_a_pty(selftest):
    with QemuSession(B.load_board("mps2-an386"), selftest("mps2-an386"), uart="pty") as qemu:
        assert qemu.client.transport.description.startswith("QEMU mps2-an386")
        assert qemu.client.echo(b"\x00\xEB\x90pty") == b"\x00\xEB\x90pty"
        np.testing.assert_array_equal(qemu.infer([selftest_input()]).outputs[0], selftest_input() ^ np.int8(0x5A))


def test_an_interrupt_while_qemu_starts_leaves_no_qemu_and_no_working_folder(selftest, monkeypatch):
    """SIGTERM (edgekit.interrupts raises it as a KeyboardInterrupt) landing right after QEMU was spawned, before
    its UART is connected: the process is killed and its ekq- folder and the session's ekc- counts folder removed."""
    from edgekit.firmware import qemu as Q

    seen = []

    def interrupted(path, *args, **kwargs):
        seen.append(Path(path).parent)
        raise KeyboardInterrupt

    real_mkdtemp, made = Q.tempfile.mkdtemp, []

    def mkdtemp(*args, **kwargs):
        made.append(Path(real_mkdtemp(*args, **kwargs)))
        return str(made[-1])

    monkeypatch.setattr(Q.SocketTransport, "connect", staticmethod(interrupted))
    monkeypatch.setattr(Q.tempfile, "mkdtemp", mkdtemp)
    before, live_before = set(p.pid for p in qemu_children()), set(Q._LIVE)
    with pytest.raises(KeyboardInterrupt):
        QemuSession(B.load_board("mps2-an386"), selftest("mps2-an386"), count_instructions=True)
    assert len(seen) == 1 and sorted(p.name[:4] for p in made) == ["ekc-", "ekq-"]
    assert not [p for p in made if p.exists()]
    assert not [p for p in qemu_children() if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE]
    assert set(Q._LIVE) == live_before


def test_an_interrupt_during_close_still_kills_qemu_and_removes_its_folder(selftest, monkeypatch):
    """A second Ctrl-C while close() waits for QEMU's polite exit: QEMU is SIGKILLed, the folder still removed."""
    from edgekit.firmware import qemu as Q

    process = QemuProcess(B.load_board("mps2-an386"), selftest("mps2-an386"))
    workdir, pid = process.workdir, process.process.pid
    waits = []

    def wait_exit(timeout_s):
        waits.append(timeout_s)
        if len(waits) == 1:
            raise KeyboardInterrupt
        return process.process.wait(timeout=timeout_s)

    real_killpg, signals = Q.os.killpg, []

    def killpg(pgid, signum):  # the polite SIGTERM is lost (QEMU ignores it); only the forced kill acts
        signals.append(signum)
        if signum == signal.SIGKILL:
            real_killpg(pgid, signum)

    monkeypatch.setattr(process, "wait_exit", wait_exit)
    monkeypatch.setattr(Q.os, "killpg", killpg)
    with pytest.raises(KeyboardInterrupt):
        process.close()
    assert signals == [signal.SIGTERM, signal.SIGKILL]
    assert process.process.poll() == -signal.SIGKILL and not psutil.pid_exists(pid)
    assert not workdir.exists() and process not in Q._LIVE


def test_a_sigterm_during_close_waits_until_qemu_and_its_folder_are_gone(selftest, monkeypatch):
    """The CI failure of stop 32: the command's SIGTERM lands while close() waits for QEMU to exit. The signal is
    deferred: QEMU exits, the folder is removed, then Terminated (edgekit.interrupts) is raised."""
    from edgekit.firmware import qemu as Q
    from edgekit.interrupts import Terminated, signals_as_interrupt

    process = QemuProcess(B.load_board("mps2-an386"), selftest("mps2-an386"))
    workdir, real_wait = process.workdir, process.wait_exit

    def wait_exit(timeout_s):
        os.kill(os.getpid(), signal.SIGTERM)  # delivered to this (the main) thread's handler at once
        return real_wait(timeout_s)

    monkeypatch.setattr(process, "wait_exit", wait_exit)
    with signals_as_interrupt(), pytest.raises(Terminated):
        process.close()
    assert process.process.poll() is not None and not workdir.exists() and process not in Q._LIVE


def test_missing_elf_and_real_board_are_rejected(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        QemuSession(B.load_board("mps2-an386"), tmp_path / "nope.elf")
    with pytest.raises(UserError, match="real hardware"):
        QemuProcess(B.load_board("nucleo-l4r5zi"), tmp_path / "nope.elf")


# ------------------------------------------------------------------ the model firmware (main.c)


def conv_pool_model():
    from tests.firmware import opmodels as om

    rng = np.random.default_rng(0)
    weights = rng.integers(-127, 128, size=(8, 3, 3, 4)).astype(np.int8)
    bias = rng.integers(-500, 500, size=(8,)).astype(np.int32)
    return om.build_graph(
        [om.T([1, 8, 8, 4], scale=0.05, zero_point=-3),
         om.T([8, 3, 3, 4], scale=[0.01 + 0.001 * i for i in range(8)], zero_point=[0] * 8, data=weights),
         om.T([8], dtype="int32", scale=[0.0005 + 0.00005 * i for i in range(8)], zero_point=[0] * 8, data=bias),
         om.T([1, 8, 8, 8], scale=0.1, zero_point=2), om.T([1, 4, 4, 8], scale=0.1, zero_point=2)],
        [("CONV_2D", [0, 1, 2], [3], {"padding": "SAME", "fused_activation_function": "RELU"}),
         ("MAX_POOL_2D", [3], [4], {"padding": "VALID", "stride_w": 2, "stride_h": 2,
                                    "filter_width": 2, "filter_height": 2})],
        [0], [4])


def build_model_firmware(board, model: bytes, folder: Path, plan: dict, arena_bytes: int) -> Path:
    """What the generator produces for main.c, reduced: the whole model, the prepared model and the generated model
    API (edgekit.firmware.app_api) sized for ``arena_bytes``; built with the runtime's defines for it."""
    from edgekit.firmware.app_api import write_app_api
    from edgekit.firmware.generate import runtime_defines, write_model_files, write_prepared_files
    from edgekit.tflite_graph import read_graph

    folder.mkdir(parents=True, exist_ok=True)
    write_model_files(folder, model, name="conv-pool", sha="0" * 64, arena=plan["arena_bytes"],
                      state=plan["state_bytes"], board=board.name)
    write_prepared_files(folder, plan["prepared_blob"], slots=plan["state_slots"], optimize=plan["optimize"])
    write_app_api(folder, read_graph(model), dict(plan, arena_bytes=arena_bytes), flash_bytes=len(model),
                  source="conv-pool", board_name=board.name)
    runtime = B.FIRMWARE_DIR / "runtime" / "src"
    kernels = [runtime / "kernels" / name for name in ("registry.c", "conv_2d.c", "pooling.c")]  # the model's ops only
    sources = [B.APP_DIR / "main.c", B.APP_DIR / "ek_serve.c", B.PROTOCOL_DIR / "ek_proto.c",
               *sorted(folder.glob("*.c")), *sorted(runtime.glob("*.c")), *kernels]
    defines = {flag[2:]: None for flag in runtime_defines(plan).split() if flag != "-DEK_KERNEL_LIST"}
    return B.build_elf(board, sources, folder / "build", defines=defines,
                       include_dirs=[B.RUNTIME_INCLUDE, runtime, B.APP_DIR, B.PROTOCOL_DIR, folder])


@pytest.mark.slow
def test_model_firmware_is_bit_exact_and_counted(tmp_path):
    from edgekit.firmware.generate import memory_plan
    from edgekit.tflite_graph import read_graph
    from tests.firmware import opmodels as om

    model = conv_pool_model()
    board = B.load_board("mps2-an386")
    plan = memory_plan(model, read_graph(model), "conv-pool", board=board)
    # balanced mode streams the convolution's rows straight into the pool: one group, one op hook, one count
    assert [(g["first_op"], g["last_op"]) for g in plan["streamed_groups"]] == [(0, 1)]
    elf = build_model_firmware(board, model, tmp_path / "ok", plan, plan["arena_bytes"])
    rng = np.random.default_rng(1)
    with QemuSession(board, elf, count_instructions=True) as qemu:
        info = qemu.info
        assert info.ready and info.runtime == "edgekit-rt 1" and info.model_name == "conv-pool"
        assert info.model_bytes == len(model) and info.model_crc32 == zlib.crc32(model)
        assert info.arena_used == plan["arena_bytes"] and 0 < info.state_used <= plan["state_bytes"]
        assert info.op_count == 2 and [t.shape for t in info.inputs] == [(1, 8, 8, 4)]
        for _ in range(2):
            x = rng.integers(-128, 128, size=(1, 8, 8, 4)).astype(np.int8)
            result = qemu.infer([x])
            np.testing.assert_array_equal(result.outputs[0], om.reference(model, [x])[0])
            assert len(result.op_instructions) == 1 and 0 < result.op_instructions[0] < result.instructions
        assert 0 < result.stack_used < info.stack_bytes

    # the same firmware with an arena one byte short: INFO says why, INFER is refused
    small = build_model_firmware(board, model, tmp_path / "small", plan, plan["arena_bytes"] - 16)
    with QemuSession(board, small) as qemu:
        assert not qemu.info.ready and qemu.info.init_status == 5 and qemu.info.inputs == ()
        with pytest.raises(DeviceError, match="failed to initialise"):
            qemu.infer([np.zeros((1, 8, 8, 4), np.int8)])
