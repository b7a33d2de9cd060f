"""Every benchmark's --smoke mode runs and records figures, so a refactor that breaks a benchmark fails CI.

The smokes call each script's main() in this process (a subprocess per script re-imported TensorFlow and
edgekit: 10-25 s each); the script's command-line entry is run as a subprocess by run_all (below)."""
import json

import pytest

from tests.benchmarks.run_all import BENCHMARKS, takes
from tests.conftest import run_benchmark_main

# lines a benchmark's smoke run must print (its key figures), beyond exit 0 and recorded figures
EXPECTED_OUTPUT = {
    "bench_optimized_kernels": ("quantize: bare converter", "-> ratio", "parity throughput:",
                                "ms per inference: float BUILTIN_REF"),
    "bench_ray_parity": ("1 worker(s):", "2 worker(s):", "scaling 1 -> 2 workers", "peak RSS", "digits 1 -> 2 workers",
                         "metrics identical across worker counts (floats within 1e-9 relative): True"),
    "bench_cycle_estimates": ("est. ms @120MHz", "published ms", "estimate vs measurement"),
    "bench_lab_matrix": ("1 parallel place(s): run", "2 parallel place(s): run", "speed-up 1 -> 2 parallel places",
                         "same instructions and bit-exactness per cell with 1 and 2 parallel places: True"),
    "bench_model_zoo": ("folded before calibration: {'DEQUANTIZE'", "bit-exact vs LiteRT BUILTIN_REF: True",
                        "smallest working arena", "instructions per inference:", "hand_landmark_lite:"),
    "bench_weight_flash": ("KWS --weights int8: flash", "AD --weights relaid: flash", "(measured, host build",
                           "IC --weights auto: flash", "within the budget"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_smoke_mode_runs_and_records_figures(name, tmp_path, monkeypatch, capfd):
    assert takes(name, "--smoke"), f"{name} has no --smoke mode: every benchmark needs one (tests/benchmarks/_figures.py)"
    figures = tmp_path / "figures.json"
    args = ["--smoke"]
    with_figures = takes(name, "--figures")
    args += ["--figures", str(figures)] if with_figures else ["--json", str(tmp_path / "raw.json")]
    code, stdout, stderr = run_benchmark_main(name, args, monkeypatch, capfd)
    assert code == 0, f"{name} --smoke failed:\n{stdout[-3000:]}\n{stderr[-3000:]}"
    assert "skipped" not in stdout.lower()[:200], f"{name} skipped itself: {stdout[:200]}"
    for line in EXPECTED_OUTPUT.get(name, ()):
        assert line in stdout, (name, line, stdout[-3000:])
    if with_figures:
        data = json.loads(figures.read_text())
        assert data["benchmark"] == name and data["smoke"] is True
        assert data["figures"], f"{name} recorded no figures"
        for figure in data["figures"]:
            assert figure["method"] in ("measured", "estimated", "quoted", "count") and figure["source"], figure
    else:
        assert (tmp_path / "raw.json").is_file()


def test_run_all_writes_one_summary_with_every_figure_and_its_source(tmp_path):
    from tests.benchmarks import run_all

    assert run_all.main(["--smoke", "--only", "bench_runner_overhead", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    (entry,) = summary["benchmarks"]
    assert entry["benchmark"] == "bench_runner_overhead" and entry["exit_code"] == 0 and entry["wall_seconds"] > 0
    assert entry["figures"] and all(f["source"] and f["method"] for f in entry["figures"])
    text = (tmp_path / "summary.md").read_text()
    assert "## bench_runner_overhead" in text and entry["figures"][0]["name"] in text


def test_run_all_turns_a_benchmark_json_into_figures():
    from tests.benchmarks.run_all import figures_from_raw

    rows = [{"model": "KWS", "board": "mps2-an386", "mode": "balanced", "instructions": 3_764_219, "macs": 2_656_768,
             "bit_exact": True, "ram": {"runtime": 10156, "arena": 9648, "stack_high_water_device": 664},
             "flash": {"total": 99908, "prepared": 14868, "runtime_code": 22096},
             "targets": {"ram_ratio": 0.4458, "instr_ratio": 0.4889},
             "tflm": {"method": "quoted: real TFLM on QEMU mps2-an386"}}]
    figures = {f["name"]: f for f in figures_from_raw("bench_firmware_mlperf", {"rows": rows})}
    key = "KWS on mps2-an386 (balanced)"
    assert figures[f"{key}: instructions per inference"]["value"] == 3_764_219
    assert figures[f"{key}: RAM (arena + mutable state)"]["value"] == 10156
    assert figures[f"{key}: bit-exact vs LiteRT BUILTIN_REF"]["value"] is True
    assert "quoted: real TFLM" in figures[f"{key}: RAM / TFLM arena"]["source"]
    assert len(figures) == 11 and all(f["method"] in ("measured", "count") and f["source"] for f in figures.values())


def test_run_all_turns_the_scale_benchmarks_json_into_figures():
    from tests.benchmarks.run_all import figures_from_raw

    ray_rows = {"scaling_efficiency": 0.8, "rows": [{"dataset": "small", "workers": 2, "samples_per_s": 900.0,
                                                     "wall_time_s": 3.0, "samples": 60, "cosine": 0.99,
                                                     "sqnr_db": 20.0, "peak_rss_ray_mib": 700.0},
                                                    {"dataset": "large", "workers": 2, "samples_per_s": 950.0,
                                                     "wall_time_s": 6.0, "samples": 120, "cosine": 0.99, "sqnr_db": 20.0,
                                                     "peak_rss_ray_mib": 710.0, "peak_pss_ray_mib": 420.0,
                                                     "peak_uss_ray_mib": 390.0, "peak_object_store_mib": 0.01,
                                                     "load_average": 3.5}]}
    figures = {f["name"]: f for f in figures_from_raw("bench_ray_parity", ray_rows)}
    assert figures["small (60 samples), 2 worker(s): samples per s"]["value"] == 900.0
    assert "small (60 samples), 2 worker(s): peak pss ray mib" not in figures  # an older run's row: no PSS
    assert figures["large (120 samples), 2 worker(s): peak pss ray mib"]["value"] == 420.0
    assert figures["large (120 samples), 2 worker(s): load average"]["value"] == 3.5
    assert figures["scaling efficiency 1 -> 2 workers"]["value"] == 0.8
    kernels = figures_from_raw("bench_optimized_kernels", {"size": 160, "calib": 64, "quantize_ratio": 1.2,
                                                           "parity_ratio": 1.1, "edgekit_s": 12.0, "parity_s": 2.0})
    assert {f["name"] for f in kernels} >= {"edgekit quantize / bare converter", "parity / bare LiteRT invoke loop"}
    assert all(f["method"] == "measured" and f["source"] for f in [*figures.values(), *kernels])


def test_a_smoke_run_that_hangs_is_stopped_at_its_limit(monkeypatch, capfd):
    """The in-process smokes have the limit their subprocesses had: a hanging main() fails the test, and the
    alarm and the previous SIGALRM handler are restored."""
    import signal
    import sys
    import time
    import types

    from tests.conftest import BenchmarkTimeout

    cleaned = []

    def main():
        try:
            time.sleep(30)
        finally:
            cleaned.append(True)   # the benchmark's own cleanup still runs

    monkeypatch.setitem(sys.modules, "tests.benchmarks._hanging", types.SimpleNamespace(main=main))
    before = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()
    with pytest.raises(BenchmarkTimeout, match="_hanging --smoke ran longer than 1 s"):
        run_benchmark_main("_hanging", ["--smoke"], monkeypatch, capfd, timeout_s=1)
    assert time.monotonic() - started < 10 and cleaned == [True]
    assert signal.getsignal(signal.SIGALRM) is before and signal.alarm(0) == 0
