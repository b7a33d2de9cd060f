"""Silence the C++ and progress chatter of converters at the file-descriptor level."""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import threading
from typing import Iterator, List

log = logging.getLogger(__name__)

# File descriptors are process-wide: two threads redirecting them at once would each save the other's temporary
# file as "the original" and leave stdout pointing into a deleted file (all later output lost, exit 0). One
# capture at a time; re-entrant, so a capture nested in the same thread still works.
_FD_LOCK = threading.RLock()


@contextlib.contextmanager
def captured_output(fds: tuple[int, ...] = (1, 2), *, always: bool = False) -> Iterator[List[str]]:
    """Capture everything written to ``fds`` (also by C++ code); the text is kept in the list
    so errors can quote it. Under DEBUG logging nothing is captured, unless ``always`` (the caller
    needs the text itself, e.g. TFLM's allocation report). Captures from several threads take turns."""
    lines: List[str] = []
    if not always and logging.getLogger("edgekit").isEnabledFor(logging.DEBUG):
        yield lines
        return
    with _FD_LOCK:
        yield from _capture(fds, lines)


def _capture(fds: tuple[int, ...], lines: List[str]) -> Iterator[List[str]]:
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
