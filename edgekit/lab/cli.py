"""`edgekit lab MATRIX.yaml -o OUT`: run a models x boards matrix (see edgekit.lab.matrix for the file)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Dict


def register(subparsers) -> Dict[str, Callable]:
    p = subparsers.add_parser("lab", help="models x boards matrix: quantize once, build per board, run every cell "
                                          "in parallel across free boards, one table (resumable)")
    p.add_argument("matrix", type=Path, help="MATRIX.yaml: models (int8 .tflite, or model + calibration), boards "
                                             "(qemu: BOARD | labgrid: PLACE | serial: PORT), iterations, inputs, parallel")
    p.add_argument("-o", "--outdir", type=Path, required=True,
                   help="output folder; rerunning with the same folder skips finished cells")
    p.add_argument("--parallel", type=int, help="cells at once (default: the matrix's parallel, else 1)")
    return {"lab": cmd_lab}


def cmd_lab(args) -> int:
    from edgekit.console import say
    from edgekit.errors import UserError
    from edgekit.lab.matrix import load_matrix
    from edgekit.lab.schedule import run_matrix
    from edgekit.lab.table import write_table
    from edgekit.progress import progress_bars

    if args.parallel is not None and args.parallel <= 0:
        raise UserError("--parallel must be positive")
    matrix = load_matrix(args.matrix)
    args.outdir.mkdir(parents=True, exist_ok=True)
    _write_manifest(args.outdir, matrix)   # marks OUT as edgekit's: a rerun into it resumes
    total = len(matrix.models) * len(matrix.boards)
    with progress_bars(sys.stderr.isatty()) as progress:
        advance = progress("cells", total)
        table = run_matrix(matrix, args.outdir, parallel=args.parallel, on_cell=lambda row: advance(1))
    write_table(args.outdir, table)
    summary = table.summary
    say(f"{summary['cells']} cells: {summary['ok']} ok, {summary['does-not-fit']} do not fit, {summary['failed']} "
        f"failed ({summary['resumed']} from an earlier run); wall {table.timing.wall_s} s")
    for row in table.cells:
        if row["status"] == "failed":
            say(f"  {row['model']} on {row['board']}: {row['error']}")
    say(f"wrote {args.outdir}/table.json, table.md, heatmap.png, report.html")
    return 0 if summary["failed"] == 0 else 4


def _write_manifest(outdir: Path, matrix) -> None:
    from edgekit import __version__
    from edgekit.lab.cells import write_json_atomically

    write_json_atomically(outdir / "manifest.json", {
        "stage": "lab", "edgekit": __version__, "matrix": str(matrix.source),
        "models": [m.name for m in matrix.models], "boards": [b.device for b in matrix.boards],
        "files": ["table.json", "table.md", "heatmap.png", "report.html", "cells/MODEL__BOARD/cell.json", "cells/MODEL__BOARD/run/"]})
