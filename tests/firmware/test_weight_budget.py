"""--weights auto's per-op flash budget (issue 29: flash of a prepared model <= 1.2x its int8 .tflite by default).

The greedy choice (edgekit.firmware.weight_budget, pure Python), the runtime's per-op layout mask (ek_init_opt_ops:
a mixed plan runs bit-exact over its compacted constants; an all-int8 / all-relaid mask gives the whole-model blobs
byte for byte) and the default plan of the MLPerf Tiny models on the Cortex-M4 board.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from edgekit.firmware import host_runtime as H
from edgekit.firmware.constants import compact_constants
from edgekit.firmware.weight_budget import (FLASH_LIMIT, LayoutCandidate, choose_layouts, estimated_saving,
                                            flash_limit_bytes, layout_ops, op_work, ranked)
from edgekit.tflite_graph import read_graph
from tests.firmware.test_constants import _bit_exact, _runtime_over

MLPERF = Path(__file__).resolve().parents[1] / "fixtures" / "mlperf_tiny"
MODELS = ["kws_ref_model_int8.tflite", "ic_resnet8_int8.tflite", "ad_autoencoder_int8.tflite"]


def _c(op: int, extra: int, saved: int, name: str = "CONV_2D") -> LayoutCandidate:
    return LayoutCandidate(op, name, extra, macs=0, outputs=0, saved_instructions=saved)


# --- the greedy choice (pure Python) --------------------------------------------------------------------------

def test_the_greedy_takes_the_most_instructions_per_byte_first_and_skips_what_does_not_fit():
    a, b, c, d = _c(0, 100, 1000), _c(1, 400, 2000), _c(2, 50, 100), _c(3, 300, 2400)
    assert [x.op for x in ranked([a, b, c, d])] == [0, 3, 1, 2]  # 10, 8, 5, 2 instructions per byte
    # 100 + 300 fit 450; b (400) does not fit what is left, c (50) still does
    assert [x.op for x in choose_layouts([a, b, c, d], 450)] == [0, 3, 2]
    assert [x.op for x in choose_layouts([a, b, c, d], 10_000)] == [0, 3, 1, 2]
    assert choose_layouts([a, b, c, d], 99) == [c]


def test_copies_that_cost_no_flash_are_always_taken_and_ones_that_save_nothing_never():
    free, useless = _c(5, 0, 10), _c(6, 10, 0)
    assert choose_layouts([free, useless], 0) == [free]
    assert choose_layouts([free, useless], -100) == [free]  # over budget already: only the free copy
    assert choose_layouts([useless], 1_000) == []


def test_ties_go_to_the_bigger_saving_then_to_op_order():
    small, big, later = _c(2, 10, 100), _c(4, 20, 200), _c(7, 10, 100)
    assert [x.op for x in ranked([later, small, big])] == [4, 2, 7]


def test_the_flash_limit_is_the_smaller_of_1_2x_the_tflite_and_the_board_less_its_code_reserve():
    assert FLASH_LIMIT == 1.2
    assert flash_limit_bytes(100_000, None, 65_536) == 120_000
    assert flash_limit_bytes(100_000, 4 << 20, 65_536) == 120_000
    assert flash_limit_bytes(100_000, 150_000, 65_536) == 150_000 - 65_536


def test_the_estimate_follows_the_op_shapes():
    graph = read_graph((MLPERF / "kws_ref_model_int8.tflite").read_bytes())
    assert layout_ops(graph) == [0, 2, 4, 6, 8, 11]  # CONV_2D and FULLY_CONNECTED (not the depthwise ones)
    assert op_work(graph, 0) == (25 * 5 * 64 * 10 * 4 * 1, 25 * 5 * 64)  # 10x4 filter on 1 channel
    assert op_work(graph, 2) == (25 * 5 * 64 * 64, 25 * 5 * 64)  # 1x1 on 64 channels
    assert op_work(graph, 11) == (12 * 64, 12)
    assert estimated_saving("CONV_2D", 512_000, 8_000) > estimated_saving("CONV_2D", 320_000, 8_000) > 0
    assert estimated_saving("DEPTHWISE_CONV_2D", 10**6, 10**4) == 0


# --- the runtime's per-op mask ------------------------------------------------------------------------------

def _blob(model: bytes, **kw) -> bytes:
    return H.HostRuntime(model, optimize="balanced", **kw).prepared["blob"]


@pytest.mark.parametrize("name", ["kws_ref_model_int8.tflite", "ad_autoencoder_int8.tflite"])
def test_an_all_int8_or_all_relaid_mask_gives_the_whole_model_blobs(name):
    model = (MLPERF / name).read_bytes()
    ops = range(len(read_graph(model).ops))
    assert _blob(model, relaid_ops=[]) == _blob(model, flash_layouts=False)
    assert _blob(model, relaid_ops=ops) == _blob(model)


@pytest.mark.parametrize("name,relaid", [("kws_ref_model_int8.tflite", [0, 4, 11]),
                                         ("ic_resnet8_int8.tflite", [1, 5, 9]),
                                         ("ad_autoencoder_int8.tflite", [0, 3, 9])])
def test_a_mixed_per_op_plan_runs_bit_exact_over_its_compacted_constants(name, relaid):
    """Some CONV_2D / FULLY_CONNECTED ops with re-laid-out copies, the others int8: its flash lies strictly between
    the int8 and the all-relaid plans', and it matches LiteRT BUILTIN_REF over the compacted constants."""
    model = (MLPERF / name).read_bytes()
    rt = H.HostRuntime(model, optimize="balanced", relaid_ops=relaid)
    c = compact_constants(model, rt.prepared["blob"])
    flash = len(c.data) + len(c.blob)
    int8 = compact_constants(model, _blob(model, flash_layouts=False))
    relaid_all = compact_constants(model, _blob(model))
    assert len(int8.data) + len(int8.blob) < flash < len(relaid_all.data) + len(relaid_all.blob)
    assert H.prepared_init_error(c.data, c.blob) is None
    _runtime_over(model, rt, c.data, c.blob)
    assert _bit_exact(model, rt, range(2))


def test_a_per_op_choice_needs_a_prepared_model():
    model = (MLPERF / "ad_autoencoder_int8.tflite").read_bytes()
    with pytest.raises(H.InternalError, match="relaid_ops"):
        H.HostRuntime(model, relaid_ops=[0])
    with pytest.raises(H.InternalError, match="relaid_ops"):
        H.HostRuntime(model, optimize="balanced", flash_layouts=False, relaid_ops=[0])


# --- the default plan -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", MODELS)
def test_the_default_plan_on_the_cortex_m4_board_keeps_flash_at_most_1_2x_the_tflite(name):
    """--weights auto (the default) on mps2-an386: measured flash (constants + blob) <= 1.2x; the ops that kept their
    copies, their extra bytes and the estimated saving are recorded; the plan runs bit-exact."""
    from edgekit.firmware.boards import load_board
    from edgekit.firmware.generate import DEFAULT_WEIGHTS, choose_memory_plan

    model = (MLPERF / name).read_bytes()
    graph = read_graph(model)
    assert DEFAULT_WEIGHTS == "auto"
    plan = choose_memory_plan(model, graph, name, "balanced", load_board("mps2-an386"))
    layouts = plan["weight_layouts"]
    c = compact_constants(model, plan["prepared_blob"])
    assert (len(c.data), len(c.blob)) == (layouts["constants_bytes"], plan["prepared_bytes"])
    assert (len(c.data) + len(c.blob)) / len(model) <= FLASH_LIMIT
    budget = layouts["flash_budget"]  # all copies exceed 1.2x on these three models: a per-op choice
    assert budget["flash_bytes"] == len(c.data) + len(c.blob) <= budget["limit_bytes"] == int(FLASH_LIMIT * len(model))
    assert budget["int8_flash_bytes"] < budget["flash_bytes"] < budget["relaid_flash_bytes"]
    chosen = layouts["relaid_ops"]
    assert chosen and all(graph.ops[r["op"]].name == r["op_name"] for r in chosen)
    assert budget["estimated_instructions_saved"] == sum(r["estimated_instructions_saved"] for r in chosen) > 0
    assert budget["estimated_instructions_saved"] < budget["estimated_instructions_saved_relaid"]
    assert "estimated" in budget["estimate"] and "estimated" in layouts["note"]
    rt = H.HostRuntime(model, optimize="balanced", relaid_ops=[r["op"] for r in chosen])
    assert rt.prepared["blob"] == plan["prepared_blob"]
    _runtime_over(model, rt, c.data, c.blob)
    assert _bit_exact(model, rt)


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None,
                    reason="arm-none-eabi-gcc is not installed (apt-get install gcc-arm-none-eabi)")
def test_edgekit_firmware_says_which_ops_kept_their_copies_within_the_budget(tmp_path, cli, capsys):
    """The default `edgekit firmware` on the Cortex-M4 board: the CLI names the per-op choice and its budget, and
    firmware.json plan.weight_layouts records it (the ops, their extra bytes, the estimated saving, the budget)."""
    model = MLPERF / "ad_autoencoder_int8.tflite"
    assert cli("firmware", model, "--board", "mps2-an386", "-o", tmp_path / "fw") == 0
    out = capsys.readouterr().out
    assert "--weights auto: re-laid-out weights for" in out and "(1.2x the .tflite)" in out and "(estimated)" in out
    layouts = json.loads((tmp_path / "fw" / "firmware.json").read_text())["plan"]["weight_layouts"]
    budget = layouts["flash_budget"]
    assert layouts["weights"] == "auto" and budget["flash_bytes"] <= budget["limit_bytes"]
    assert f"{len(layouts['relaid_ops'])} op(s)" in out and f"{budget['limit_bytes']:,} B" in out
    assert {r["op_name"] for r in layouts["relaid_ops"]} == {"FULLY_CONNECTED"}
    assert all(r["extra_bytes"] > 0 and r["estimated_instructions_saved"] > 0 for r in layouts["relaid_ops"])
