"""SIGTERM and SIGHUP end a command the way Ctrl-C (SIGINT) does: as a ``KeyboardInterrupt`` that unwinds.

CI systems and job schedulers stop a job with SIGTERM (a closed terminal sends SIGHUP). Python's default for
both is to die at once: no ``finally`` runs, so a QEMU child keeps running, a half-built output folder and temp
folders stay. ``signals_as_interrupt`` makes them raise ``Terminated`` (a ``KeyboardInterrupt`` subclass that
carries the signal number), so every cleanup that already works for Ctrl-C works for them too, and the CLI
exits with the shell's convention 128 + signal number (143 for SIGTERM, 129 for SIGHUP, 130 for SIGINT).
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Dict, Iterator, List

# the signals handled like SIGINT (SIGHUP does not exist on Windows)
HANDLED = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None)


class Terminated(KeyboardInterrupt):
    """The process received ``signum`` (SIGTERM or SIGHUP); raised where Ctrl-C would raise KeyboardInterrupt."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def interrupt_signal(exc: BaseException) -> int:
    """The signal number behind a KeyboardInterrupt (SIGINT unless it is a ``Terminated``)."""
    return getattr(exc, "signum", int(signal.SIGINT))


def raise_terminated(signum: int, frame=None) -> None:
    """Signal handler: raise ``Terminated``. Later SIGTERM/SIGHUP are ignored so the cleanup they started can finish
    (SIGKILL still stops the process at once)."""
    for other in HANDLED:
        try:
            signal.signal(other, signal.SIG_IGN)
        except (ValueError, OSError):  # not the main thread: nothing to change
            pass
    raise Terminated(signum)


@contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise ``Terminated`` in the main thread; the old handlers come back after.

    Outside the main thread (Python only lets the main thread set handlers) the block runs unchanged.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: Dict[int, object] = {}
    for signum in HANDLED:
        if signal.getsignal(signum) is signal.SIG_IGN:
            continue  # started under nohup (SIGHUP) or told to ignore it: keep that choice
        previous[signum] = signal.signal(signum, raise_terminated)
    try:
        yield
    finally:
        for signum, before in previous.items():
            signal.signal(signum, before)  # type: ignore[arg-type]


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Within the block, Ctrl-C, SIGTERM and SIGHUP wait: a cleanup that must finish (kill a child, remove its
    folder) is not cut in half. The first signal that arrived is acted on as the block ends, by the handler that
    was in place before (``Terminated`` / ``KeyboardInterrupt``, or the default action).

    Outside the main thread (where Python never runs signal handlers) the block runs unchanged.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: List[int] = []
    previous: Dict[int, object] = {}
    for signum in (int(signal.SIGINT), *HANDLED):
        before = signal.getsignal(signum)
        if before is signal.SIG_IGN or before is None:  # ignored, or set outside Python: nothing to defer
            continue
        previous[signum] = signal.signal(signum, lambda n, frame: pending.append(n))
    try:
        yield
    finally:
        for signum, before in previous.items():
            signal.signal(signum, before)  # type: ignore[arg-type]
        if pending:
            _deliver(pending[0], previous[pending[0]])


def _deliver(signum: int, handler: object) -> None:
    """Act on a deferred signal as ``handler`` (what was installed when it arrived) would have."""
    if callable(handler):
        handler(signum, None)
    elif handler is signal.SIG_DFL:
        signal.raise_signal(signum)
