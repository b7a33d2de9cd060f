"""Every benchmark's --smoke mode runs and records figures, so a refactor that breaks a benchmark fails CI."""
import json
import os
import subprocess
import sys

import pytest

from tests.benchmarks.run_all import BENCHMARKS, script, takes
from tests.conftest import REPO

SMOKE_TIMEOUT_S = 300


@pytest.mark.slow
@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_smoke_mode_runs_and_records_figures(name, tmp_path):
    if not takes(name, "--smoke"):
        pytest.skip("smoke mode comes with issue 12 branch")
    figures = tmp_path / "figures.json"
    cmd = [sys.executable, str(script(name)), "--smoke"]
    with_figures = takes(name, "--figures")
    cmd += ["--figures", str(figures)] if with_figures else ["--json", str(tmp_path / "raw.json")]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=SMOKE_TIMEOUT_S)
    assert proc.returncode == 0, f"{name} --smoke failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "skipped" not in proc.stdout.lower()[:200], f"{name} skipped itself: {proc.stdout[:200]}"
    if with_figures:
        data = json.loads(figures.read_text())
        assert data["benchmark"] == name and data["smoke"] is True
        assert data["figures"], f"{name} recorded no figures"
        for figure in data["figures"]:
            assert figure["method"] in ("measured", "estimated", "quoted", "count") and figure["source"], figure
    else:
        assert (tmp_path / "raw.json").is_file()
