"""One edgekit run at a time per output folder: ``-o out`` is locked for the whole command.

Two runs that wrote the same folder at once both succeeded and the first result silently disappeared (each
replaces the folder as a whole). The lock is ``flock`` on ``.<name>.lock`` beside the folder (the kernel releases
it when the holder exits, even on SIGKILL, so a lock can never go stale); the file says who holds it (pid, command,
start time), and the second run fails at once naming them. Re-entrant within one process: the CLI takes it before
any work, and ``atomic_output_dir`` inside the same run finds it already held.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, Optional, Tuple

from edgekit.errors import UserError

try:
    import fcntl
except ImportError:  # Windows: no flock; output folders are not locked there
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)
_HELD: Dict[str, Tuple[int, int]] = {}  # lock path -> (fd, depth) held by this process


class OutputLockedError(UserError):
    """Another edgekit run is writing the same output folder."""


def lock_path(outdir: Path) -> Path:
    absolute = Path(os.path.abspath(outdir))
    return absolute.parent / f".{absolute.name}.lock"


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text())
        started = time.strftime("%H:%M:%S", time.localtime(info["started"]))
        return f"pid {info['pid']}, `{info['command']}`, started {started}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process (its lock file says no more)"


def _acquire(path: Path) -> int:
    """An fd holding an exclusive flock on ``path`` (a file that still has that name), or OutputLockedError."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputLockedError(
                f"output folder {path.parent / path.name[1:-5]} is being written by another edgekit run "
                f"({_holder(path)})", fix="wait for that run to finish, or pass -o another folder") from None
        try:  # the previous holder may have removed the file between our open and our lock: lock the new one
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


@contextlib.contextmanager
def output_lock(outdir: Path, command: Optional[str] = None) -> Iterator[None]:
    """Hold the lock of ``outdir`` for the block (re-entrant in one process); removed again on release.
    ``command``: how the holder is described to a second run (default: this process's command line)."""
    if fcntl is None:
        yield
        return
    path = lock_path(outdir)
    key = str(path)
    if key in _HELD:
        fd, depth = _HELD[key]
        _HELD[key] = (fd, depth + 1)
        try:
            yield
        finally:
            fd, depth = _HELD[key]
            _HELD[key] = (fd, depth - 1)
        return
    if not path.parent.is_dir():  # nothing can be written there yet; the output checks report why
        yield
        return
    try:
        fd = _acquire(path)
    except OutputLockedError:
        raise
    except OSError as exc:  # no lock file possible there (read-only, permissions): writing reports the real problem
        log.debug("output folder %s not locked: %s", outdir, exc)
        yield
        return
    _HELD[key] = (fd, 1)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "command": (command or " ".join(["edgekit", *sys.argv[1:]]))[:300],
                                 "started": time.time()}).encode())
    except OSError:
        pass  # a full disk: the lock still holds, only the holder's description is missing
    try:
        yield
    finally:
        del _HELD[key]
        with contextlib.suppress(OSError):
            os.unlink(path)  # while still locked: a waiting opener then re-checks the inode (see _acquire)
        os.close(fd)
