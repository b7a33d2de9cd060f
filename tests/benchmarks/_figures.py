"""The one way every benchmark emits its figures (and takes --smoke).

Each benchmark adds the common options with ``bench_options(parser)``, records every figure it prints with
``FigureLog.add(name, value, unit, method=measured|estimated|quoted, source=what produced it)``, and ends with
``log.write(args.figures)``. ``tests/benchmarks/run_all.py`` (``make bench``) passes ``--figures`` to each script
and merges the files into one summary (out/bench/summary.json + summary.md).

``--smoke`` runs the same code paths with tiny sizes in seconds; tests/test_benchmarks_smoke.py runs every smoke mode.
"""
from __future__ import annotations

import json
import math
import platform
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

METHODS = ("measured", "estimated", "quoted", "count")


def bench_options(parser) -> None:
    """--smoke and --figures, the same in every benchmark."""
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes, seconds: checks that the benchmark still runs (its figures mean little)")
    parser.add_argument("--figures", type=Path, default=None,
                        help="write every figure with what produced it as JSON here (make bench merges these)")


class FigureLog:
    """Figures of one benchmark run: name, value, unit, method and source, plus the run's context."""

    def __init__(self, benchmark: str, *, smoke: bool = False, argv: Optional[List[str]] = None) -> None:
        self.benchmark = benchmark
        self.smoke = smoke
        self.argv = list(sys.argv[1:] if argv is None else argv)
        self.started = time.time()
        self.figures: List[Dict[str, Any]] = []
        self.notes: List[str] = []

    def add(self, name: str, value: Any, unit: str = "", *, method: str = "measured", source: str = "",
            **context: Any) -> None:
        """One figure; ``source`` says what produced it (tool, model, board, data), ``context`` any other key."""
        if method not in METHODS:
            raise ValueError(f"method {method!r} must be one of {METHODS}")
        self.figures.append({"name": name, "value": _plain(value), "unit": unit, "method": method, "source": source,
                             **({"context": {k: _plain(v) for k, v in context.items()}} if context else {})})

    def note(self, text: str) -> None:
        """A caveat that applies to the whole benchmark (data generated, tool versions, ...)."""
        self.notes.append(text)

    def to_json(self) -> Dict[str, Any]:
        return {"benchmark": self.benchmark, "smoke": self.smoke, "argv": self.argv,
                "host": {"python": platform.python_version(), "machine": platform.machine(),
                         "platform": platform.platform()},
                "seconds": round(time.time() - self.started, 2), "notes": self.notes, "figures": self.figures}

    def write(self, path: Optional[Path]) -> None:
        if path is None:
            return
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        tmp.replace(path)
        print(f"figures: {len(self.figures)} written to {path}")


def _plain(value: Any) -> Any:
    """JSON-safe: numpy scalars to Python, NaN/inf to strings."""
    if hasattr(value, "item") and callable(value.item):
        try:
            value = value.item()
        except (ValueError, TypeError):
            pass
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value
