"""`edgekit verify OUTDIR`: re-hash every artifact against manifest.json (and firmware images against firmware.json)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Dict


def register(subparsers) -> Dict[str, Callable]:
    v = subparsers.add_parser("verify", help="re-hash every artifact of an output folder against its manifest.json / "
                                             "firmware.json; exit 1 naming what changed")
    v.add_argument("outdir", type=Path, help="a folder written by quantize, parity -o, compile, firmware or deploy")
    return {"verify": cmd_verify}


def cmd_verify(args) -> int:
    from edgekit.verify import verify_folder

    report = verify_folder(args.outdir)
    from edgekit.console import say

    for problem in report.problems:
        text = problem.describe(args.outdir)
        say(f"CHANGED {text}" if problem.actual else f"MISSING {text}", file=sys.stderr)
    checked = len(report.checks)
    if report.skipped:
        say(f"not checked: {len(report.skipped)} file(s) outside {args.outdir} (e.g. the source model)")
    if report.ok:
        say(f"verify: all {checked} artifact(s) in {args.outdir} match their recorded sha256")
        return 0
    say(f"verify FAILED: {len(report.problems)} of {checked} artifact(s) in {args.outdir} do not match their "
        "recorded sha256", file=sys.stderr)
    return 1
