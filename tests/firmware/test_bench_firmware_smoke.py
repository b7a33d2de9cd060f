"""tests/benchmarks/bench_firmware_mlperf.py --smoke: KWS and AD prepared in every --optimize mode and run through
the same C runtime on this host, bit-exact with LiteRT BUILTIN_REF, with the RAM figures the benchmark prints."""
from __future__ import annotations

import json

import pytest

from tests.conftest import run_benchmark_main


@pytest.mark.slow
def test_smoke_mode_prints_every_mode_bit_exact_and_the_ram_targets(tmp_path, monkeypatch, capfd):
    out = tmp_path / "bench.json"
    code, stdout, stderr = run_benchmark_main("bench_firmware_mlperf", ["--smoke", "--json", str(out)], monkeypatch, capfd)
    assert code == 0, stdout + stderr
    result = json.loads(out.read_text())
    rows = {(r["model"], r["mode"]): r for r in result["rows"]}
    assert set(rows) == {(m, o) for m in ("KWS", "AD") for o in ("speed", "balanced", "ram")}
    assert all(r["bit_exact"] for r in rows.values())
    # the RAM target (<= 0.5x TFLM's smallest working arena) holds in the default mode for both models
    for model in ("KWS", "AD"):
        r = rows[(model, "balanced")]
        assert r["ram"]["runtime"] == r["ram"]["arena"] + r["ram"]["mutable_state_estimated_32bit"]
        assert r["targets"]["ram_met"], r
        # the overlapped plan never needs more arena than the in-place .tflite plan
        assert r["ram"]["arena"] <= r["ram"]["plain_tflite_arena"]
    # ram mode is never larger than speed mode
    for model in ("KWS", "AD"):
        assert rows[(model, "ram")]["ram"]["arena"] <= rows[(model, "speed")]["ram"]["arena"]
    assert "| KWS | host | balanced |" in stdout and (out.with_suffix(".md")).is_file()
