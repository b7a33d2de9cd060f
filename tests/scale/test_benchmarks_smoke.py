"""The --smoke modes of the scale benchmarks run and print their figures (tiny sizes; the real figures
come from running the scripts without --smoke)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _run(script: str) -> str:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, str(BENCH / script), "--smoke"], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_bench_optimized_kernels_smoke():
    out = _run("bench_optimized_kernels.py")
    for figure in ("quantize: bare converter", "-> ratio", "parity throughput:", "ms per inference: float BUILTIN_REF"):
        assert figure in out, out


@pytest.mark.slow
def test_bench_ray_parity_smoke():
    pytest.importorskip("ray")
    out = _run("bench_ray_parity.py")
    for figure in ("1 worker(s):", "2 worker(s):", "scaling 1 -> 2 workers", "metrics identical across worker counts", "peak RSS"):
        assert figure in out, out
    assert "metrics identical across worker counts (floats within 1e-9 relative): True" in out
