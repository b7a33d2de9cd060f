"""Console output for people: short lines (at most WIDTH characters, wrapped at spaces with an indent), key figures
first; long provenance belongs in report.md / run.json, which the summary names."""
from __future__ import annotations

import sys
import textwrap
from typing import Iterable, List, Optional, TextIO

WIDTH = 118


def fit(line: str, width: int = WIDTH) -> List[str]:
    """One logical line as console lines of at most ``width`` characters (continuations indented)."""
    if len(line) <= width:
        return [line]
    indent = " " * min(len(line) - len(line.lstrip()) + 2, 8)
    return textwrap.wrap(line, width=width, subsequent_indent=indent, break_long_words=True, break_on_hyphens=False)


def say(*lines: str, file: Optional[TextIO] = None) -> None:
    """Print each (possibly multi-line) text, every console line at most WIDTH characters."""
    out = file or sys.stdout
    for text in lines:
        for line in str(text).splitlines() or [""]:
            for part in fit(line):
                print(part, file=out)


def say_all(lines: Iterable[str], file: Optional[TextIO] = None) -> None:
    say(*list(lines), file=file)
