import importlib
import logging
import os
import shutil
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
DEMO_MODEL = REPO / "edgekit" / "demo" / "digits_cnn.pt2"
DIGITS = REPO / "calibration_data" / "digits"
# committed fixtures (tests/fixtures/mlperf_tiny/README.md: upstream, commit, license, SHA256SUMS)
MLPERF = Path(os.environ.get("EDGEKIT_MLPERF_DIR", REPO / "tests" / "fixtures" / "mlperf_tiny"))
SMOKE_TIMEOUT_S = 600  # one benchmark smoke run in-process (tests/test_benchmarks_smoke.py, tests/firmware/...)


RAY_GROUP = "ray"  # every test that starts or uses a local Ray


def pytest_collection_modifyitems(config, items):
    """Worker groups for pytest-xdist (the Makefile runs ``-n 2 --dist loadgroup``): a test file runs on one
    worker, so its module fixtures are built once; the Ray tests (tests/scale shares one local Ray per package)
    and the Ray benchmark's smoke share one worker, so two Rays never compete for the 2 CPUs."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        path = Path(str(item.fspath)).resolve().relative_to(REPO)
        ray = path.parts[:2] == ("tests", "scale") or "bench_ray_parity" in item.nodeid
        item.add_marker(pytest.mark.xdist_group(RAY_GROUP if ray else path.as_posix()))


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory, monkeypatch):
    """Statistics cache per test session, never the user's."""
    monkeypatch.setenv("EDGEKIT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture(autouse=True)
def json_files_match_their_schemas(request):
    """Every stamped JSON file a test leaves in its tmp_path validates against its edgekit/schemas/ schema."""
    folder = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if folder is None:
        return
    from tests.schema_check import check_tree

    _, problems = check_tree(folder)
    assert not problems, "JSON written by edgekit does not match its schema:\n" + "\n".join(problems[:20])


@pytest.fixture(autouse=True)
def rebind_closed_log_streams():
    """torch gives some loggers a StreamHandler bound to sys.stderr at import time; under pytest that is a
    capture stream closed after the test that imported torch, and a later warning would print a logging
    traceback into another test's stderr. Point such handlers back at the real stderr."""
    yield
    import logging
    import sys

    loggers = [logging.getLogger()] + [v for v in logging.Logger.manager.loggerDict.values() if isinstance(v, logging.Logger)]
    for logger in loggers:
        for handler in logger.handlers:
            if type(handler) is logging.StreamHandler and getattr(handler.stream, "closed", False):
                handler.stream = sys.__stderr__  # not setStream(): it flushes the closed stream


@pytest.fixture
def mlperf() -> Path:
    if not MLPERF.is_dir():
        pytest.fail(f"MLPerf Tiny fixtures not found at {MLPERF} (committed under tests/fixtures/mlperf_tiny)")
    return MLPERF


@pytest.fixture(scope="session")
def demo_float_tflite(tmp_path_factory) -> Path:
    """The demo model exported once to float TFLite (the reference for parity tests)."""
    from edgekit.export import to_float_tflite

    path = tmp_path_factory.mktemp("demo") / "digits_float.tflite"
    path.write_bytes(to_float_tflite(str(DEMO_MODEL)).tflite)
    return path


@pytest.fixture(scope="session")
def demo_quantized(tmp_path_factory) -> Path:
    """`edgekit quantize` of the demo model on the committed calibration digits (default options), run once per
    session: its output folder. Tests only read it (copy it to change anything)."""
    from edgekit.cli import main

    out = tmp_path_factory.mktemp("demo-quantized") / "q"
    assert main(["quantize", str(DEMO_MODEL), "--calib", str(DIGITS / "calib"), "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="session")
def demo_quantized_80(tmp_path_factory) -> Path:
    """quantize() of the demo model with calib_size=80 (64 calibrate, 16 held out), run once per session: its
    output folder. Tests only read it (copy it to change anything)."""
    from edgekit.quantize import QuantizeOptions, quantize

    out = tmp_path_factory.mktemp("demo-quantized-80") / "q"
    quantize(str(DEMO_MODEL), DIGITS / "calib", out, QuantizeOptions(calib_size=80))
    return out


@pytest.fixture(scope="session")
def digits_arrays():
    """(calib, eval, eval_labels) digits as float arrays through the committed spec."""
    from edgekit.calibration.dataset import ImageFolderSource
    from edgekit.preprocessing.spec import find_spec

    def load(folder):
        src = ImageFolderSource(folder, find_spec(folder))
        return np.concatenate([src.load(i)[0] for i in range(len(src))]), np.array(src.labels)

    calib, _ = load(DIGITS / "calib")
    evaluation, labels = load(DIGITS / "eval")
    return calib, evaluation, labels


def run_cli(*args: str) -> int:
    from edgekit.cli import main

    return main([str(a) for a in args])


class BenchmarkTimeout(Exception):
    """A benchmark's smoke run took longer than its limit."""


def run_benchmark_main(name: str, args, monkeypatch, capfd, timeout_s: int = SMOKE_TIMEOUT_S):
    """``python tests/benchmarks/NAME.py ARGS`` as its main() in this process (TensorFlow and edgekit are imported
    once, not once per benchmark), with the subprocess's cwd and environment; what the script changes in
    os.environ, sys.path and loggers (level, handlers, propagate) is undone after. Returns (exit code, stdout,
    stderr), captured at the file-descriptor level (QEMU, gcc and Ray print there too). A run longer than
    ``timeout_s`` is stopped by SIGALRM (raised in main(), so its own cleanup runs) and fails the test, as the
    subprocess's timeout did before the smokes ran in-process."""
    saved_env, saved_path = dict(os.environ), list(sys.path)
    loggers = [logging.getLogger()] + [v for v in logging.Logger.manager.loggerDict.values() if isinstance(v, logging.Logger)]
    saved_logging = [(logger, logger.level, list(logger.handlers), logger.propagate) for logger in loggers]
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(sys, "argv", [str(REPO / "tests" / "benchmarks" / f"{name}.py"), *args])
    os.environ.update({"PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0", "TF_CPP_MIN_LOG_LEVEL": "3"})
    capfd.readouterr()

    def too_long(signum, frame):
        raise BenchmarkTimeout(f"{name} {' '.join(map(str, args))} ran longer than {timeout_s} s")

    previous = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(timeout_s)
    try:
        try:
            code = importlib.import_module(f"tests.benchmarks.{name}").main()
        except SystemExit as exit_:
            code = exit_.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.path[:] = saved_path
        for logger, level, handlers, propagate in saved_logging:
            logger.setLevel(level)
            logger.handlers[:] = handlers
            logger.propagate = propagate
    out = capfd.readouterr()
    return code, out.out, out.err


@pytest.fixture
def cli():
    return run_cli


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst
