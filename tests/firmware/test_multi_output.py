"""Operators with several outputs through the whole runtime: reader, planner, prepared blob, interpreter, device.

One graph: SPLIT_V into three parts (the third never read) -> ADD on the first -> SQUEEZE -> EXPAND_DIMS (both in
place) and MUL on the second -> CONCATENATION. Checked: bit-exact with LiteRT BUILTIN_REF on the host (in place and
prepared with the overlapped plan), the plan's lifetimes and in-place aliases, the prepared blob's slot count, and
(slow) the same model on QEMU mps2-an386 bit-exact.
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from edgekit.firmware.host_runtime import HostRuntime
from tests.firmware.opmodels import T, build_graph, random_input
from tests.firmware.test_kernels_elementwise import assert_bit_exact, const_i32
from tests.firmware.test_planner import check_plan

needs_qemu = pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                                reason="qemu-system-arm or arm-none-eabi-gcc is not installed")


def split_branches_model() -> bytes:
    q_in, q_out = {"scale": 0.05, "zero_point": 3}, {"scale": 0.08, "zero_point": -2}
    tensors = [
        T([1, 6, 6, 6], **q_in), const_i32([2, 3, 1]), const_i32(3),           # 0 x, 1 size_splits, 2 axis
        T([1, 6, 6, 2], **q_in), T([1, 6, 6, 3], **q_in), T([1, 6, 6, 1], **q_in),  # 3 a, 4 b, 5 c (unused)
        T([1, 6, 6, 2], **q_out), T([6, 6, 2], **q_out), const_i32([0]),         # 6 a+a, 7 squeezed, 8 axis
        T([1, 6, 6, 2], **q_out), T([1, 6, 6, 3], **q_out), T([1, 6, 6, 5], **q_out),  # 9 expanded, 10 b*b, 11 out
    ]
    ops = [("SPLIT_V", [0, 1, 2], [3, 4, 5], {"num_splits": 3}),
           ("ADD", [3, 3], [6], None),
           ("SQUEEZE", [6], [7], {"squeeze_dims": [0]}),
           ("EXPAND_DIMS", [7, 8], [9], None),
           ("MUL", [4, 4], [10], None),
           ("CONCATENATION", [9, 10], [11], {"axis": 3})]
    return build_graph(tensors, ops, [0], [11])


def test_split_branches_concat_is_bit_exact_and_planned_soundly():
    model = split_branches_model()
    rng = np.random.default_rng(0)
    for _ in range(3):
        assert_bit_exact(model, random_input(model, rng), "SPLIT_V -> branches -> CONCATENATION")
    rt = HostRuntime(model)
    check_plan(model, rt)
    t = {e["index"]: e for e in rt.plan["tensors"]}
    # all three outputs are written by op 0; each lives until its last reader (the unused one only during op 0)
    assert [t[k]["first_op"] for k in (3, 4, 5)] == [0, 0, 0]
    assert (t[3]["last_op"], t[4]["last_op"], t[5]["last_op"]) == (1, 4, 0)
    # the three outputs are live together at op 0: disjoint bytes
    spans = sorted((t[k]["offset"], t[k]["offset"] + t[k]["bytes"]) for k in (3, 4, 5))
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    # SQUEEZE and EXPAND_DIMS run in place: their outputs share the ADD output's bytes
    assert t[7]["alias_of"] == 6 and t[9]["alias_of"] == 6
    assert t[7]["offset"] == t[9]["offset"] == t[6]["offset"]


def test_prepared_blob_records_the_widest_op_outputs():
    rt = HostRuntime(split_branches_model(), optimize="balanced")
    prepared = rt.prepared
    header = np.frombuffer(prepared["blob"][:4 * 22], dtype="<u4")
    assert header[1] == 3 and header[16] == 3 and header[21] == 3  # version, max op inputs, max op outputs
    assert prepared["state_slots"] == 3 + 3 + 1 + 1  # op inputs + op outputs + graph input + graph output


def test_outputs_listed_twice_or_absent_are_refused():
    from edgekit.errors import EdgekitError

    tensors = [T([4, 2]), const_i32(0), T([2, 2]), T([2, 2])]
    twice = build_graph(tensors, [("SPLIT", [1, 0], [2, 2], {"num_splits": 2})], [0], [2])
    with pytest.raises(EdgekitError, match="listed twice"):
        HostRuntime(twice)
    absent = build_graph(tensors, [("SPLIT", [1, 0], [2, -1], {"num_splits": 2})], [0], [2])
    with pytest.raises(EdgekitError, match="absent output"):
        HostRuntime(absent)


@pytest.mark.slow
@needs_qemu
def test_split_branches_concat_runs_bit_exact_on_qemu(tmp_path, cli):
    path = tmp_path / "split_branches.tflite"
    path.write_bytes(split_branches_model())
    out = tmp_path / "run"
    assert cli("run", path, "--device", "qemu:mps2-an386", "-n", "2", "-o", out) == 0
    run = json.loads((out / "run.json").read_text())
    exact = run["outputs_bit_exact"]
    assert exact["value"] is True and exact["differing_elements"] == 0 and exact["total_elements"] % 180 == 0 < exact["total_elements"]
    assert [o["op"] for o in run["per_op_instructions"]] == ["SPLIT_V", "ADD", "SQUEEZE", "EXPAND_DIMS", "MUL",
                                                             "CONCATENATION"]
