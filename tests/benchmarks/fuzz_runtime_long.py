"""Long fuzzing run of the edgekit runtime (reader + planner + prepare + invoke, libFuzzer + ASan + UBSan).

    python tests/benchmarks/fuzz_runtime_long.py [--runs 200000] [--max-total-time 900] [-o build/fuzz_long]

Seeds: MLPerf Tiny int8 models (tests/fixtures/mlperf_tiny), the demo int8 model (quantized here with
`edgekit quantize` unless --no-demo), one model per supported operator, two small graphs, and --mutants
field-level variants of each of those small models (so mutation starts past the reader, in the kernels). Prints the
number of inputs executed, coverage (edges / features), corpus growth and crashes, and writes result.json.
Exit status 0 only if at least --min-execs inputs ran and nothing crashed, leaked or hung.
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "firmware" / "fuzz"))

from make_corpus import write_corpus  # noqa: E402
from run_fuzz import run_fuzzer  # noqa: E402

MLPERF = REPO / "tests" / "fixtures" / "mlperf_tiny"


def demo_int8(work: Path) -> Path:
    from edgekit.cli import main

    out = work / "demo_quantized"
    if not (out / "model_int8.tflite").exists():
        code = main(["quantize", str(REPO / "edgekit" / "demo" / "digits_cnn.pt2"), "--calib",
                     str(REPO / "calibration_data" / "digits" / "calib"), "-o", str(out)])
        if code != 0:
            raise SystemExit("edgekit quantize failed on the demo model")
    path = work / "demo_int8.tflite"
    path.write_bytes((out / "model_int8.tflite").read_bytes())
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200_000)
    parser.add_argument("--max-total-time", type=int, default=900, help="seconds (the run stops at whichever comes first)")
    parser.add_argument("--min-execs", type=int, default=10_000)
    parser.add_argument("--no-demo", action="store_true")
    parser.add_argument("--mutants", type=int, default=20, help="structured mutants per single-op seed model")
    parser.add_argument("-o", "--out", type=Path, default=None, help="work dir (default: a temporary one)")
    args = parser.parse_args()

    work = args.out or Path(tempfile.mkdtemp(prefix="ekrt-fuzz-"))
    work.mkdir(parents=True, exist_ok=True)
    extra = [] if args.no_demo else [demo_int8(work)]
    seeds = write_corpus(work / "seeds", mlperf=MLPERF if MLPERF.is_dir() else None, extra=extra,
                         mutants_per_op=args.mutants)
    result = run_fuzzer(work, runs=args.runs, max_total_time=args.max_total_time, timeout=10, seeds=seeds)
    clang = subprocess.run(["clang", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    report = {
        **{k: v for k, v in result.to_json().items() if k != "log_tail"},
        "execs_per_second": round(result.execs / result.seconds, 1) if result.seconds else None,
        "runs_requested": args.runs, "max_total_time": args.max_total_time,
        "seed_names": sorted(p.name for p in seeds), "compiler": clang, "host": platform.platform(),
        "sanitizers": "address,undefined (+ fuzzer), -fno-sanitize-recover=all", "work_dir": str(work),
    }
    (work / "result.json").write_text(json.dumps(report, indent=2))
    print(f"inputs executed : {result.execs} in {result.seconds} s ({report['execs_per_second']}/s)")
    print(f"coverage        : {result.coverage} edges, {result.features} features")
    print(f"corpus          : {result.seeds} seeds -> {result.corpus_size} inputs")
    print(f"crashes/leaks/timeouts: {len(result.artifacts)} {result.artifacts}")
    print(f"libFuzzer exit  : {result.exit_code}")
    print(f"report          : {work / 'result.json'}  (log: {work / 'fuzz.log'})")
    ok = result.clean and result.execs >= args.min_execs
    if not ok:
        print(result.log_tail)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
