"""The ekcount QEMU TCG plugin: exact instruction counts on a loop whose instruction count is known, per
inference and per operator, in both counting modes, on every QEMU board; its output parser and arguments."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from edgekit.errors import DeviceError, UserError
from edgekit.firmware import boards as B
from edgekit.firmware import plugin as PL
from edgekit.firmware.protocol import DeviceClient
from edgekit.firmware.qemu import QemuProcess, QemuSession

needs_tools = pytest.mark.skipif(
    not (shutil.which("qemu-system-arm") and shutil.which("arm-none-eabi-gcc") and shutil.which("gcc")),
    reason="qemu-system-arm, arm-none-eabi-gcc and gcc are needed")


def loop_input(loops: int, ops: int, action: int = 0) -> np.ndarray:
    x = np.zeros((1, 16), np.int8)
    x[0, :4] = np.frombuffer(np.uint32(loops).tobytes(), dtype=np.int8)
    x[0, 4], x[0, 6] = ops, action
    return x


def expected_ops(loops: int, ops: int):
    # firmware/app/selftest.c: op k runs ek_selftest_loop(loops * (k + 1)); between the markers:
    # the begin marker's `bx lr`, (subs, bne) per iteration, the `bl` to the end marker
    return [2 * loops * (k + 1) + 2 for k in range(ops)]


@needs_tools
@pytest.mark.parametrize("name", ["mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547"])
def test_known_loop_counts_exactly_on_every_board(selftest, name):
    with QemuSession(B.load_board(name), selftest(name), count_instructions=True) as qemu:
        first = qemu.infer([loop_input(1000, 3)])
        second = qemu.infer([loop_input(7, 5)])
    assert first.op_instructions == expected_ops(1000, 3) == [2002, 4002, 6002]
    assert second.op_instructions == expected_ops(7, 5)
    # the inference adds only the loop driver around the ops: a few instructions per op
    for result, ops in ((first, 3), (second, 5)):
        overhead = result.instructions - sum(result.op_instructions)
        assert 0 < overhead < 20 * ops + 20


@needs_tools
def test_per_block_and_per_instruction_modes_agree(selftest):
    results = {}
    for label, options in (("tb", {}), ("insn", {"plugin_mode": "insn"}), ("tb+icount", {"icount": True})):
        with QemuSession(B.load_board("mps2-an386"), selftest("mps2-an386"), count_instructions=True,
                         **options) as qemu:
            results[label] = [(r.instructions, r.op_instructions)
                              for r in (qemu.infer([loop_input(n, k)]) for n, k in ((50, 2), (3000, 1), (1, 8)))]
    assert results["tb"] == results["insn"] == results["tb+icount"]


@needs_tools
def test_counts_survive_a_fault_and_the_exit_total_is_written(selftest):
    board = B.load_board("mps2-an386")
    with QemuSession(board, selftest("mps2-an386"), count_instructions=True) as qemu:
        qemu.infer([loop_input(10, 1)])
        with pytest.raises(DeviceError, match="FAULT"):
            qemu.infer([loop_input(10, 1, action=2)])
        assert qemu.qemu.wait_exit(5) == 3
        counts = qemu.counts()
    assert len(counts.inferences) == 1 and counts.open_inference
    assert counts.total_instructions > counts.inferences[0].instructions


@needs_tools
def test_firmware_without_markers_and_bad_plugin_arguments(selftest, tmp_path):
    silent = selftest("mps2-an386", "silent")  # never calls the markers: --gc-sections dropped them
    assert PL.marker_addresses(silent) == {}
    with pytest.raises(UserError, match="no ek_marker_infer_begin/end"):
        QemuSession(B.load_board("mps2-an386"), silent, count_instructions=True)
    addresses = PL.marker_addresses(selftest("mps2-an386"))
    assert set(addresses) == {"ib", "ie", "ob", "oe"} and all(a % 2 == 0 for a in addresses.values())
    bad = f"{PL.build_plugin()},out={tmp_path / 'c.txt'},bogus=1"
    with pytest.raises(DeviceError) as exc:  # QEMU refuses the plugin and exits; its log says why
        with QemuProcess(B.load_board("mps2-an386"), selftest("mps2-an386"), plugin=bad, connect_timeout_s=5) as qemu:
            DeviceClient(qemu.transport, timeout_s=5, context=qemu.describe).wait_boot()
    assert "ekcount: unknown argument: bogus=1" in str(exc.value) and "QEMU exited with code 1" in str(exc.value)


def test_plugin_build_is_cached(tmp_path):
    if not shutil.which("gcc"):
        pytest.skip("host gcc is not installed")
    first = PL.build_plugin(tmp_path)
    stamp = first.stat().st_mtime_ns
    assert PL.build_plugin(tmp_path) == first and first.stat().st_mtime_ns == stamp


def test_parse_counts_and_arguments(tmp_path):
    out = tmp_path / "counts.txt"
    out.write_text("# ekcount 1 mode=tb\nB 100\nb 110\ne 150\nb 160\ne 200\nE 210\nB 300\nb 310\ne 3")
    counts = PL.parse_counts(out)  # second inference still being written: last line incomplete
    assert [(c.instructions, c.op_instructions) for c in counts.inferences] == [(110, [40, 40])]
    assert counts.open_inference and counts.total_instructions is None
    out.write_text("B 1\nE 11\nX 500\n")
    assert PL.parse_counts(out).total_instructions == 500
    out.write_text("B 1\nQ 5\nE 11\n")
    with pytest.raises(DeviceError, match="unknown plugin event"):
        PL.parse_counts(out)
    with pytest.raises(DeviceError, match="wrote no output"):
        PL.parse_counts(tmp_path / "missing.txt")
    with pytest.raises(UserError, match="comma"):
        PL.plugin_argument(Path("/tmp/a,b.so"), out, {})
    assert PL.plugin_argument(Path("/p/ekcount.so"), out, {"ib": 0x10, "ie": 0x20}) == \
        f"/p/ekcount.so,out={out},mode=tb,ib=0x10,ie=0x20"


@needs_tools
@pytest.mark.parametrize("name", ["mps2-an386", "mps3-an547"])
def test_instruction_classes_of_the_known_loop(selftest, name):
    """Per class: every instruction counted once; the loop's (subs, bne) per iteration are one ALU and one
    conditional branch, taken on all but the last iteration."""
    with QemuSession(B.load_board(name), selftest(name), count_instructions=True) as qemu:
        small = qemu.infer([loop_input(10, 1)])
        large = qemu.infer([loop_input(1010, 1)])
    for result in (small, large):
        classes = result.instruction_classes
        counted = sum(v for k, v in classes.items() if k not in PL.EXTRA_TALLIES)
        assert counted == result.instructions
    delta = {k: large.instruction_classes[k] - small.instruction_classes[k] for k in large.instruction_classes}
    assert delta["alu"] == 1000 and delta["branch_conditional"] == 1000 and delta["branch_conditional_taken"] == 1000
    assert all(v == 0 for k, v in delta.items() if k not in ("alu", "branch_conditional", "branch_conditional_taken"))
    assert large.instruction_classes["load_multiple_pc"] <= large.instruction_classes["load_multiple"]
    assert large.instruction_classes["branch_conditional_taken"] < large.instruction_classes["branch_conditional"]
