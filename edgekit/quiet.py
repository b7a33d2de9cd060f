"""Silence the C++ and progress chatter of converters at the file-descriptor level."""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from typing import Iterator, List

log = logging.getLogger(__name__)


@contextlib.contextmanager
def captured_output(fds: tuple[int, ...] = (1, 2), *, always: bool = False) -> Iterator[List[str]]:
    """Capture everything written to ``fds`` (also by C++ code); the text is kept in the list
    so errors can quote it. Under DEBUG logging nothing is captured, unless ``always`` (the caller
    needs the text itself, e.g. TFLM's allocation report)."""
    lines: List[str] = []
    if not always and logging.getLogger("edgekit").isEnabledFor(logging.DEBUG):
        yield lines
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in fds}
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        for fd in fds:
            os.dup2(tmp.fileno(), fd)
        try:
            yield lines
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            tmp.seek(0)
            lines.extend(tmp.read().decode("utf-8", "replace").splitlines())
