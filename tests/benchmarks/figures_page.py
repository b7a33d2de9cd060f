#!/usr/bin/env python
"""Generate docs/figures.md from a benchmark summary (what run_all.py writes as summary.json).

    python tests/benchmarks/run_all.py --only bench_cycle_estimates --out out/bench   # measure
    cp out/bench/summary.json docs/data/bench_summary.json                           # commit the summary
    python tests/benchmarks/figures_page.py            # rewrite docs/figures.md from docs/data/bench_summary.json
    python tests/benchmarks/figures_page.py --check    # exit 1 when docs/figures.md differs (a test runs this)

The page is never typed by hand: it has the estimate-vs-published table of bench_cycle_estimates (edgekit's
runtime under a Cortex-M4 cycle model next to X-CUBE-AI's published measurements) and then every figure of every
benchmark in the summary with its unit, how it was obtained (measured / estimated / count / quoted) and its source.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

REPO = Path(__file__).resolve().parents[2]
SUMMARY = REPO / "docs" / "data" / "bench_summary.json"
PAGE = REPO / "docs" / "figures.md"
TASKS = ("kws", "vww", "ic", "ad")
TASK_NAMES = {"kws": "KWS (DS-CNN)", "vww": "VWW-style MobileNet-v1 0.25 96x96 (seeded weights)",
              "ic": "IC (ResNet-8)", "ad": "AD (autoencoder)"}


class SummaryError(ValueError):
    """The summary lacks what the page needs."""


def value_text(value: Any) -> str:
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:,.2f}" if abs(value) >= 1 else f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def relative(text: str) -> str:
    """Commands and logs without the absolute checkout path of the machine that ran them."""
    return str(text).replace(f"{REPO}/", "")


def shown_command(command: str) -> str:
    """A benchmark's command as a reader would type it (run_all.py's --figures/--json file left out)."""
    command = re.sub(r" --(figures|json) \S+", "", command)
    return re.sub(r"\S*/(tests/benchmarks/\S+)", r"\1", command)  # whichever checkout ran it


def benchmark(summary: Mapping[str, Any], name: str) -> Optional[Mapping[str, Any]]:
    return next((b for b in summary.get("benchmarks", []) if b.get("benchmark") == name), None)


def estimate_table(summary: Mapping[str, Any]) -> List[str]:
    bench = benchmark(summary, "bench_cycle_estimates")
    if bench is None or bench.get("exit_code") != 0:
        raise SummaryError("the summary has no successful bench_cycle_estimates run; "
                           "run: python tests/benchmarks/run_all.py --only bench_cycle_estimates")
    if bench.get("smoke") or "--smoke" in bench.get("command", ""):
        raise SummaryError("bench_cycle_estimates ran in --smoke mode (AD only); run it in full mode")
    figures: Dict[str, Mapping[str, Any]] = {f["name"]: f for f in bench["figures"]}
    tasks = [t for t in TASKS if f"{t} latency at 120 MHz" in figures]
    if not tasks:
        raise SummaryError("bench_cycle_estimates recorded no '<task> latency at 120 MHz' figure")
    est_source = figures[f"{tasks[0]} latency at 120 MHz"]["source"]
    pub_source = figures[f"{tasks[0]} published latency"]["source"]
    lines = ["## Estimate vs published (MLPerf Tiny, Cortex-M4 at 120 MHz)", "",
             "| model | instructions per inference (count) | cycles (estimated) | latency at 120 MHz (estimated) "
             "| published latency (quoted measurement) | estimate / published |",
             "|---|---|---|---|---|---|"]
    for t in tasks:
        lines.append(f"| {TASK_NAMES[t]} | {value_text(figures[f'{t} instructions per inference']['value'])} "
                     f"| {value_text(round(figures[f'{t} cycles per inference']['value']))} "
                     f"| {figures[f'{t} latency at 120 MHz']['value']:.2f} ms "
                     f"| {figures[f'{t} published latency']['value']:.1f} ms "
                     f"| {figures[f'{t} estimate / published']['value']:.2f}x |")
    lines += ["", f"- Instructions: {cell(figures[f'{tasks[0]} instructions per inference']['source'])}.",
              f"- Cycles and latency are **estimated**: {cell(est_source)}.",
              f"- Published: {cell(pub_source)}. These are measurements of another runtime on the real board, so the "
              "ratio compares an estimate with a measurement, not like with like.", ""]
    lines += [f"- {cell(n)}" for n in bench.get("notes", [])]
    return lines


def all_figures(summary: Mapping[str, Any]) -> List[str]:
    lines: List[str] = ["## Every figure of the summary", ""]
    for b in summary["benchmarks"]:
        lines += [f"### {b['benchmark']}", "",
                  f"`{shown_command(b['command'])}`: exit {b['exit_code']}, {b['wall_seconds']:.0f} s wall.", ""]
        if not b["figures"]:
            lines += ["No figures recorded.", ""]
            continue
        sources: List[str] = []
        for f in b["figures"]:
            if f["source"] not in sources:
                sources.append(f["source"])
        lines += ["| figure | value | unit | how | source |", "|---|---|---|---|---|"]
        for f in b["figures"]:
            lines.append(f"| {cell(f['name'])} | {value_text(f['value'])} | {cell(f['unit'])} | {f['method']} "
                         f"| [{sources.index(f['source']) + 1}] |")
        lines += ["", "Sources:", ""] + [f"{i}. {cell(s)}" for i, s in enumerate(sources, 1)] + [""]
    return lines


def render(summary: Mapping[str, Any], summary_name: str = "docs/data/bench_summary.json") -> str:
    host = summary["host"]
    lines = ["<!-- generated by `python tests/benchmarks/figures_page.py` from "
             f"{summary_name}; do not edit -->", "", "# Benchmark figures", "",
             f"Generated from the committed benchmark summary `{summary_name}` (written by "
             "`tests/benchmarks/run_all.py`, the runner of `make bench`). That run started "
             f"{summary['started']} on {host['platform']} (Python {host['python']}, {host['cpus']} CPUs, load average "
             f"at start {', '.join(str(v) for v in host['load_average_1_5_15_min']['start'])}). Every figure says how "
             "it was obtained (measured / estimated / count / quoted) and from what. Figures measured on other "
             "benchmarks are on the page of their command or stage.", ""]
    if summary.get("smoke"):
        raise SummaryError("the summary is from a --smoke run (tiny sizes); the page needs full-size figures")
    lines += estimate_table(summary)
    lines += [""] + all_figures(summary)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--summary", type=Path, default=SUMMARY, help="summary.json (default docs/data/bench_summary.json)")
    parser.add_argument("--out", type=Path, default=PAGE, help="the page (default docs/figures.md)")
    parser.add_argument("--check", action="store_true", help="only check; exit 1 when the page is out of date")
    args = parser.parse_args(argv)
    try:
        summary = json.loads(args.summary.read_text(encoding="utf-8"))
        name = relative(str(args.summary.resolve()))
        text = render(summary, name)
    except (OSError, json.JSONDecodeError, KeyError, SummaryError) as exc:
        print(f"cannot make the figures page from {args.summary}: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if not args.out.is_file() or args.out.read_text(encoding="utf-8") != text:
            print(f"{args.out} is out of date: run python tests/benchmarks/figures_page.py", file=sys.stderr)
            return 1
        return 0
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(args.out)
    print(f"wrote {args.out} from {args.summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
