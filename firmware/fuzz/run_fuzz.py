"""Build and run the runtime fuzzer (libFuzzer + ASan + UBSan) and summarise what it did.

    python firmware/fuzz/run_fuzz.py WORK_DIR [--runs N] [--max-total-time S] [--demo MODEL.tflite]

WORK_DIR gets corpus/ (seeds, then whatever libFuzzer adds), artifacts/ (crash-*, timeout-*, leak-* inputs,
empty when all is well) and fuzz.log. The library functions are used by tests/firmware/test_fuzz.py and
tests/benchmarks/fuzz_runtime_long.py.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

DICTIONARY = HERE / "tflite.dict"
MAX_LEN = 300_000  # the largest seed (MLPerf AD int8) is 277 KB


@dataclass
class FuzzResult:
    exit_code: int
    execs: int
    seconds: float
    coverage: int  # libFuzzer "cov": instrumented edges reached
    features: int  # libFuzzer "ft"
    corpus_size: int
    seeds: int
    artifacts: List[str] = field(default_factory=list)
    log_tail: str = ""

    @property
    def clean(self) -> bool:
        return self.exit_code == 0 and not self.artifacts

    def to_json(self) -> dict:
        return asdict(self)


def _parse(log: str) -> dict:
    execs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", log)
    cov = re.findall(r"\bcov: (\d+)", log)
    ft = re.findall(r"\bft: (\d+)", log)
    done = re.findall(r"Done (\d+) runs", log)
    return {
        "execs": int(execs[-1]) if execs else int(done[-1]) if done else 0,
        "coverage": max(map(int, cov)) if cov else 0,
        "features": max(map(int, ft)) if ft else 0,
    }


def run_fuzzer(work: Path, *, runs: Optional[int] = None, max_total_time: Optional[int] = None, timeout: int = 10,
               seeds: Sequence[Path] = (), extra_args: Sequence[str] = (), env_timeout: Optional[float] = None) -> FuzzResult:
    """Fuzz from the seeds in work/corpus; crashes land in work/artifacts."""
    from edgekit.firmware.host_runtime import build_fuzzer

    binary = build_fuzzer()
    corpus, artifacts = work / "corpus", work / "artifacts"
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    for s in seeds:
        (corpus / Path(s).name).write_bytes(Path(s).read_bytes())
    n_seeds = len(list(corpus.iterdir()))
    cmd = [str(binary), f"-dict={DICTIONARY}", f"-max_len={MAX_LEN}", f"-timeout={timeout}", "-rss_limit_mb=2048",
           "-print_final_stats=1", f"-artifact_prefix={artifacts}/", *extra_args]
    if runs is not None:
        cmd.append(f"-runs={runs}")
    if max_total_time is not None:
        cmd.append(f"-max_total_time={max_total_time}")
    cmd.append(str(corpus))
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False,
                          timeout=env_timeout or ((max_total_time or 600) + 300))
    seconds = time.monotonic() - start
    log = done.stdout + done.stderr
    (work / "fuzz.log").write_text(log)
    stats = _parse(log)
    return FuzzResult(done.returncode, stats["execs"], round(seconds, 1), stats["coverage"], stats["features"],
                      len(list(corpus.iterdir())), n_seeds, sorted(p.name for p in artifacts.iterdir()),
                      "\n".join(log.splitlines()[-40:]))


def replay(files: Sequence[Path], work: Path) -> FuzzResult:
    """Run each file once through the sanitized target (no mutation)."""
    from edgekit.firmware.host_runtime import build_fuzzer

    binary = build_fuzzer()
    artifacts = work / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    list_file = work / "replay.txt"
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    start = time.monotonic()
    # libFuzzer runs the files named on its command line once each; batches keep argv small.
    log, code = "", 0
    names = [str(f) for f in files]
    for k in range(0, len(names), 500):
        done = subprocess.run([str(binary), f"-artifact_prefix={artifacts}/", "-timeout=10", *names[k:k + 500]],
                              capture_output=True, text=True, env=env, check=False, timeout=600)
        log += done.stdout + done.stderr
        code = code or done.returncode
    list_file.write_text("\n".join(names))
    return FuzzResult(code, len(names), round(time.monotonic() - start, 1), 0, 0, 0, len(names),
                      sorted(p.name for p in artifacts.iterdir()), "\n".join(log.splitlines()[-40:]))


def main(argv: Optional[List[str]] = None) -> int:
    from make_corpus import write_corpus

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path)
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--max-total-time", type=int, default=60)
    parser.add_argument("--mlperf", type=Path, default=REPO / "tests" / "fixtures" / "mlperf_tiny")
    parser.add_argument("--demo", type=Path, action="append", default=[])
    args = parser.parse_args(argv)
    seeds = write_corpus(args.work / "seeds", mlperf=args.mlperf, extra=args.demo)
    result = run_fuzzer(args.work, runs=args.runs, max_total_time=args.max_total_time, seeds=seeds)
    print(json.dumps({k: v for k, v in result.to_json().items() if k != "log_tail"}, indent=2))
    return 0 if result.clean else 1


if __name__ == "__main__":
    sys.exit(main())
