"""Prepared models (firmware/runtime/src/ek_prepared.c): the pointer-free blob the generator puts in flash, its
validation (a corrupt blob is rejected, never run), the overlapped plan and the per-mode fit check."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from edgekit.errors import DoesNotFitError
from edgekit.firmware.generate import early_fit_check
from edgekit.firmware.host_runtime import HostRuntime, prepared_init_error
from edgekit.tflite_graph import read_graph

KWS = "kws_ref_model_int8.tflite"
AD = "ad_autoencoder_int8.tflite"


def _inputs(rt: HostRuntime, seed: int):
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, size=s["shape"], dtype=np.int8) for s in rt.inputs]


@pytest.mark.parametrize("name", [KWS, AD])
def test_prepared_model_matches_the_in_place_path_in_every_mode_with_a_smaller_arena(mlperf, name):
    model = (mlperf / name).read_bytes()
    plain = HostRuntime(model)
    x = _inputs(plain, 7)
    want = plain.invoke(x)
    for mode in ("speed", "balanced", "ram"):
        rt = HostRuntime(model, optimize=mode)
        prepared = rt.prepared
        assert prepared["blob"][:4] == b"EKPM" and int.from_bytes(prepared["blob"][4:8], "little") == 3
        assert prepared["arena_bytes"] <= plain.plan["arena_bytes"]
        assert prepared["overlaps"], "no overlap planned"
        for a, b in zip(want, rt.invoke(x)):
            assert np.array_equal(a, b), mode


def test_kws_plans_depthwise_in_place_and_pointwise_over_its_input(mlperf):
    rt = HostRuntime((mlperf / KWS).read_bytes(), optimize="balanced")
    names = rt.op_names
    kinds = {(names[o["op"]], o["exact"]) for o in rt.prepared["overlaps"]}
    assert ("DEPTHWISE_CONV_2D", True) in kinds and ("CONV_2D", False) in kinds
    # an exact overlap puts the output exactly on its input (TinyEngine-style in place), and the packer uses it
    graph = read_graph((mlperf / KWS).read_bytes())
    offset = {t["index"]: t["offset"] for t in rt.prepared["plan"]["tensors"]}
    exact = [o for o in rt.prepared["overlaps"] if o["exact"]]
    assert sum(offset[graph.ops[o["op"]].outputs[0]] == offset[graph.ops[o["op"]].inputs[0]] for o in exact) >= 1
    assert rt.prepared["arena_bytes"] < 0.6 * rt.plan["arena_bytes"]


def test_a_corrupt_truncated_or_foreign_prepared_blob_is_rejected(mlperf):
    model = (mlperf / AD).read_bytes()
    blob = HostRuntime(model, optimize="balanced").prepared["blob"]
    assert prepared_init_error(model, blob) is None
    rng = np.random.default_rng(0)
    for at in sorted(set(rng.integers(0, len(blob), size=40).tolist()) | {0, 4, 8, 12, 100, len(blob) - 1}):
        bad = bytearray(blob)
        bad[at] ^= 0x10
        message = prepared_init_error(model, bytes(bad))
        assert message, f"flipped byte {at} accepted"
    assert "length" in prepared_init_error(model, blob[:-16])
    assert "checksum" in prepared_init_error(model, blob[:12] + b"\0\0\0\0" + blob[16:])
    other = (mlperf / KWS).read_bytes()
    assert "another model" in prepared_init_error(other, blob)
    assert "magic" in prepared_init_error(model, b"TFL3" + blob[4:])


def test_a_model_that_fits_no_mode_fails_before_building_with_the_bytes_per_mode():
    board = SimpleNamespace(name="tiny", flash=SimpleNamespace(bytes=1 << 20), ram=SimpleNamespace(bytes=8000),
                            stack_bytes=1024)
    modes = {"speed": {"arena_bytes": 9648, "state_bytes": 496}, "balanced": {"arena_bytes": 9648, "state_bytes": 496},
             "ram": {"arena_bytes": 8576, "state_bytes": 496}}
    with pytest.raises(DoesNotFitError) as info:
        early_fit_check(60000, 9648, 496, board, modes)
    text = str(info.value)
    for mode, m in modes.items():
        assert f"--optimize {mode}" in text
        assert f"{m['arena_bytes'] + m['state_bytes'] + 1024 - 8000:,} bytes too many" in text
    # one mode fits: the message names it
    roomy = SimpleNamespace(**{**vars(board), "ram": SimpleNamespace(bytes=10500)})
    with pytest.raises(DoesNotFitError, match="fits with --optimize ram"):
        early_fit_check(60000, 9648, 496, roomy, modes)
