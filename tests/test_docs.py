"""The README landing page and the documentation site (docs/, mkdocs.yml).

- the README is short, starts with the two set-up commands, and its quickstart blocks run as written;
- the generated pages (schemas, figures) equal what their generators make from the committed sources;
- every hand-written page is in the nav, and `mkdocs build --strict` passes (broken links and includes fail).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
QUICKSTART = re.compile(r"<!-- quickstart: (?P<name>[\w-]+) -->\n```sh\n(?P<body>.*?)\n```", re.S)
# what each quickstart must leave behind (relative to the folder it ran in)
PRODUCES = {
    "mobile": ["out/mobile/model_int8.tflite", "out/gpu/gpu.json", "out/host-run/run.json"],
    "embedded": ["out/kws-fw/firmware.json", "out/kws-run/run.json", "out/kws-lib/include/kws.h"],
    "qa": ["out/digits/model_int8.tflite", "out/parity/parity.json", "out/calib-check/calib_check.json"],
}
# the repository files the quickstarts read, linked into the temporary folder they run in
SHIPPED = ("edgekit", "calibration_data", "tests/fixtures")


def quickstarts() -> Dict[str, str]:
    return {m["name"]: m["body"] for m in QUICKSTART.finditer(README.read_text(encoding="utf-8"))}


def command_lines(body: str) -> list:
    """The commands of a block: comment lines dropped, backslash continuations joined."""
    joined = re.sub(r"\\\n\s*", " ", body)
    return [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_readme_is_a_short_landing_page():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move the text into a docs/ page"
    setup = [line.split("#")[0].strip() for line in lines[:8] if line.startswith("    make ")]
    assert setup == ["make demo", "make test"]
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "make test" in (REPO / ".ci" / "run").read_text()
    history = re.compile(r"issue \d+|this round|before this|previous session", re.I)
    assert not history.search(README.read_text(encoding="utf-8")), "internal history belongs in CHANGELOG.md"


def test_readme_has_one_short_quickstart_per_user():
    blocks = quickstarts()
    assert sorted(blocks) == sorted(PRODUCES)
    for name, body in blocks.items():
        assert len(body.splitlines()) <= 10, f"the {name} quickstart has more than 10 lines"
        assert all(c.startswith("edgekit ") for c in command_lines(body)), name


def test_user_docs_carry_no_internal_history():
    history = re.compile(r"\bissue \d+\b|this round|before this (round|work)|previous session", re.I)
    offenders = [f"{p.relative_to(REPO)}:{i}: {line.strip()}" for p in sorted((REPO / "docs").rglob("*.md"))
                 for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if history.search(line)]
    assert not offenders, "move internal history to CHANGELOG.md:\n" + "\n".join(offenders)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PRODUCES))
def test_quickstart_runs_as_written(name, tmp_path):
    body = quickstarts()[name]
    for rel in SHIPPED:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).symlink_to(REPO / rel)
    script = tmp_path / "quickstart.sh"
    script.write_text("set -euo pipefail\n" + body + "\n")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}".rstrip(os.pathsep))
    done = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=1500)
    assert done.returncode == 0, f"the README's {name} quickstart failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    missing = [p for p in PRODUCES[name] if not (tmp_path / p).is_file()]
    assert not missing, f"the {name} quickstart did not write {missing}"


def test_schema_pages_are_current():
    from edgekit.schemas import docs

    assert docs.stale() == [], "run: python -m edgekit.schemas.docs"


def test_figures_page_is_current_and_has_the_estimate_table():
    sys.path.insert(0, str(REPO / "tests" / "benchmarks"))
    try:
        import figures_page
    finally:
        sys.path.remove(str(REPO / "tests" / "benchmarks"))
    assert figures_page.main(["--check"]) == 0, "run: python tests/benchmarks/figures_page.py"
    page = (REPO / "docs" / "figures.md").read_text(encoding="utf-8")
    assert "## Estimate vs published" in page
    for model in ("KWS", "IC", "AD"):
        assert re.search(rf"^\| {model} .*\| \d+\.\d+ ms \| \d+\.\d ms \| \d+\.\d\dx \|$", page, re.M), model


def test_figures_page_refuses_a_smoke_summary(tmp_path):
    import json

    sys.path.insert(0, str(REPO / "tests" / "benchmarks"))
    try:
        import figures_page
    finally:
        sys.path.remove(str(REPO / "tests" / "benchmarks"))
    summary = json.loads((REPO / "docs" / "data" / "bench_summary.json").read_text())
    summary["smoke"] = True
    (tmp_path / "s.json").write_text(json.dumps(summary))
    out = tmp_path / "figures.md"
    assert figures_page.main(["--summary", str(tmp_path / "s.json"), "--out", str(out)]) == 2
    assert not out.exists()


def nav_pages(node) -> list:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [p for v in node.values() for p in nav_pages(v)]
    return [p for v in node for p in nav_pages(v)]


def test_every_hand_written_page_is_in_the_nav():
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    listed = set(nav_pages(config["nav"]))
    pages = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")}
    generated = {p for p in pages if p.startswith("schemas/") and p != "schemas/index.md"}
    assert not (pages - generated) - listed, "add these pages to mkdocs.yml's nav"
    assert not listed - pages, "mkdocs.yml's nav names pages that do not exist"


@pytest.mark.slow
def test_mkdocs_strict_build(tmp_path):
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.fail("mkdocs is not installed in this environment: run make install (requirements.lock pins it)")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    site = tmp_path / "site"
    assert (site / "figures.html").is_file() and (site / "schemas" / "run.html").is_file()
    html = (site / "runtime.html").read_text()
    assert "edgekit-op" in html or "CONV_2D" in html  # firmware/runtime/README.md was included
    assert not any("fonts.googleapis" in p.read_text(errors="ignore") for p in site.rglob("*.html"))


def test_every_cli_command_has_a_row_in_the_commands_page():
    from edgekit.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    page = (REPO / "docs" / "commands" / "index.md").read_text(encoding="utf-8")
    missing = [name for name in sub.choices if f"| `edgekit {name}` |" not in page]
    assert not missing, f"add these commands to docs/commands/index.md: {missing}"
