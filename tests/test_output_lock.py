"""Two runs on the same -o at once (issue 27): the second fails at once naming the first (pid, command); the
first's result is kept. The lock is released (and its file removed) at exit, and a lock file left by a killed
process never blocks (flock dies with its holder)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from edgekit.outlock import lock_path, output_lock
from tests.conftest import DEMO_MODEL, DIGITS, MLPERF, REPO

AD_INT8 = MLPERF / "ad_autoencoder_int8.tflite"


def test_second_run_on_the_same_folder_fails_naming_the_first_and_the_first_result_stays(tmp_path, cli, capsys):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "torch-cache")}
    first = subprocess.Popen([sys.executable, "-m", "edgekit.cli", "quantize", str(DEMO_MODEL), "--calib",
                              str(DIGITS / "calib"), "-o", str(out)], cwd=REPO, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lock = lock_path(out)
    deadline = time.monotonic() + 240
    while not (lock.is_file() and lock.stat().st_size) and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first.poll() is None, first.communicate()
    code = cli("run", AD_INT8, "--device", "host", "-n", "2", "-o", out)
    err = capsys.readouterr().err
    assert code == 2 and f"output folder {out} is being written by another edgekit run (pid {first.pid}, " \
                          f"`edgekit quantize {DEMO_MODEL}" in err, err
    assert "pass -o another folder" in err
    stdout, stderr = first.communicate(timeout=600)
    assert first.returncode == 0, stderr
    assert json.loads((out / "manifest.json").read_text())["command"] == "quantize"  # the first result is there
    assert not lock.exists()
    assert cli("run", AD_INT8, "--device", "host", "-n", "2", "-o", tmp_path / "out") == 0  # free again
    assert not lock.exists()


def test_a_lock_file_left_by_a_killed_run_does_not_block(tmp_path, cli):
    out = tmp_path / "out"
    lock_path(out).write_text('{"pid": 999999, "command": "edgekit run (killed)", "started": 0}')
    assert cli("run", AD_INT8, "--device", "host", "-n", "2", "-o", out) == 0
    assert (out / "run.json").is_file() and not lock_path(out).exists()


def test_lock_is_reentrant_in_one_process_and_exclusive_across_processes(tmp_path):
    out = tmp_path / "out"
    probe = ("import sys; from pathlib import Path; from edgekit.outlock import output_lock\n"
             "with output_lock(Path(sys.argv[1]), command='edgekit probe'): pass")
    with output_lock(out, command="edgekit outer"):
        with output_lock(out):  # the CLI's lock, then atomic_output_dir's in the same run
            pass
        assert lock_path(out).is_file()  # the inner release kept the outer lock
        other = subprocess.run([sys.executable, "-c", probe, str(out)], cwd=REPO, capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
        assert other.returncode != 0 and "OutputLockedError" in other.stderr and "edgekit outer" in other.stderr
    assert not lock_path(out).exists()
    with output_lock(out):  # released: it can be taken again
        assert lock_path(out).is_file()
