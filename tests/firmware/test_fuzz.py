"""Bounded fuzzing of the runtime's reader, planner, prepare and invoke under ASan + UBSan (libFuzzer).
The long run (>= 10,000 inputs) is tests/benchmarks/fuzz_runtime_long.py."""
from __future__ import annotations

import shutil
import sys

import numpy as np
import pytest

from tests.conftest import MLPERF, REPO

sys.path.insert(0, str(REPO / "firmware" / "fuzz"))
from make_corpus import single_op_models, structured_mutants, write_corpus  # noqa: E402
from run_fuzz import replay, run_fuzzer  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("clang") is None,
                                reason="clang with libFuzzer is not installed (apt-get install clang)")


def test_bounded_fuzz_run_finds_no_crash_leak_or_hang(tmp_path):
    seeds = write_corpus(tmp_path / "seeds", mlperf=MLPERF, check=False)
    result = run_fuzzer(tmp_path, runs=3000, max_total_time=20, timeout=5, seeds=seeds)
    assert result.clean, f"exit {result.exit_code}, artifacts {result.artifacts}\n{result.log_tail}"
    assert result.execs >= 3000 or result.seconds >= 20, result.log_tail
    assert result.coverage > 500  # the seeds reach deep into the reader, planner and kernels


def test_every_truncation_and_random_flips_replay_clean_under_sanitizers(tmp_path):
    """Each mutant is run once through the ASan + UBSan build with exactly-sized model/state/arena buffers."""
    rng = np.random.default_rng(0)
    cases = tmp_path / "cases"
    cases.mkdir()
    files = []
    for name in ("conv_2d", "float_io_fc", "reshape_chain"):
        model = single_op_models()[name]
        for n in range(0, len(model), 3 if len(model) > 1500 else 1):
            files.append(cases / f"{name}-cut{n}")
            files[-1].write_bytes(model[:n])
        for k in range(150):
            mutant = bytearray(model)
            for pos in rng.integers(0, len(model), size=int(rng.integers(1, 8))):
                mutant[pos] = int(rng.integers(256))
            files.append(cases / f"{name}-flip{k}")
            files[-1].write_bytes(bytes(mutant))
    result = replay(files, tmp_path)
    assert result.clean, f"exit {result.exit_code}, artifacts {result.artifacts}\n{result.log_tail}"


def test_structured_mutants_of_every_op_replay_clean_under_sanitizers(tmp_path):
    """Field-level variants (shapes, types, quantization, options, op codes, wiring) that pass the reader and
    hit the kernels' prepare checks and eval loops with exactly-sized buffers."""
    rng = np.random.default_rng(2)
    cases = tmp_path / "cases"
    cases.mkdir()
    files = []
    for name, model in single_op_models().items():
        for k, mutant in enumerate(structured_mutants(model, rng, 40)):
            files.append(cases / f"{name}-{k}")
            files[-1].write_bytes(mutant)
    assert len(files) > 600
    result = replay(files, tmp_path)
    assert result.clean, f"exit {result.exit_code}, artifacts {result.artifacts}\n{result.log_tail}"
