"""Run a fragile native step (TF's quantizer, LiteRT's tensor allocation) where a crash can be caught.

Native code that aborts (a failed CHECK in a kernel's Prepare, a converter assertion) kills the whole process,
and while edgekit captures a converter's stderr the abort message is lost too: the user sees nothing and exit
134. ``run_isolated`` runs the step in a forked child (Linux: fork shares the loaded libraries and the model
in memory, so it costs milliseconds, not an interpreter start); the child's result comes back through a pipe,
its stderr through another. A child killed by a signal becomes ``NativeCrashError`` naming the step, the
signal and the last lines the native code printed. Where fork is unsafe or missing (macOS, Windows) the step
runs in-process as before.
"""
from __future__ import annotations

import logging
import os
import pickle
import signal
import sys
import threading
from typing import Callable, List, Optional, TypeVar

from edgekit.errors import EdgekitError

log = logging.getLogger(__name__)

T = TypeVar("T")
STDERR_TAIL_LINES = 6
_DISABLE_ENV = "EDGEKIT_NO_ISOLATION"  # "1": run native steps in-process (debugging with gdb)
# A forked child of a multithreaded process (TF, JAX) can in rare cases deadlock on a lock another thread held at
# fork time. The watchdog kills a child that runs longer than this, so such a hang becomes an error, never a stall.
CHILD_TIMEOUT_S = float(os.environ.get("EDGEKIT_NATIVE_TIMEOUT_S", "1800"))


class NativeCrashError(EdgekitError):
    """A native library (converter, runtime) crashed in an isolated step; edgekit itself is still alive."""

    exit_code = 3


class ChildError(Exception):
    """A Python exception raised by the step in the child, re-raised in the parent with its type name and text."""

    def __init__(self, type_name: str, message: str, stderr: str) -> None:
        super().__init__(message)
        self.type_name = type_name
        self.stderr = stderr


def isolation_available() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork") and os.environ.get(_DISABLE_ENV) != "1"


def _read_all(fd: int, sink: List[bytes]) -> None:
    with os.fdopen(fd, "rb") as handle:
        sink.append(handle.read())


def run_isolated(step: str, fn: Callable[[], T], *, fix: Optional[str] = None,
                 timeout_s: Optional[float] = None) -> T:
    """``fn()`` in a forked child; its (picklable) return value, or NativeCrashError if the child dies by a signal
    or runs longer than ``timeout_s`` (default CHILD_TIMEOUT_S; it is then killed).

    A Python exception in the child is re-raised as ``ChildError`` (type name, message, the child's stderr).
    """
    if not isolation_available():
        return fn()
    result_r, result_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        code = 0
        try:
            import faulthandler

            faulthandler.disable()  # the crash is reported by the parent, not as a Python traceback dump
            os.close(result_r)
            os.close(err_r)
            os.dup2(err_w, 2)
            try:
                payload = ("ok", fn())
            except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
                payload = ("error", (type(exc).__name__, str(exc)))
                code = 1
            with os.fdopen(result_w, "wb") as out:
                pickle.dump(payload, out, protocol=pickle.HIGHEST_PROTOCOL)
        finally:
            os._exit(code)
    os.close(result_w)
    os.close(err_w)
    result: List[bytes] = []
    errors: List[bytes] = []
    readers = [threading.Thread(target=_read_all, args=(result_r, result), daemon=True),
               threading.Thread(target=_read_all, args=(err_r, errors), daemon=True)]
    for t in readers:
        t.start()
    limit = CHILD_TIMEOUT_S if timeout_s is None else timeout_s
    timed_out = threading.Event()

    def kill_hung_child() -> None:
        timed_out.set()
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    watchdog = threading.Timer(limit, kill_hung_child)
    watchdog.daemon = True
    watchdog.start()
    try:
        _, status = os.waitpid(pid, 0)
    except BaseException:  # Ctrl-C / SIGTERM (edgekit.interrupts) in the parent: the child must not outlive it
        kill_hung_child()
        os.waitpid(pid, 0)
        raise
    finally:
        watchdog.cancel()
    for t in readers:
        t.join()
    if timed_out.is_set():
        raise NativeCrashError(f"{step} did not finish within {limit:.0f} s and was stopped",
                               fix=fix or "rerun with EDGEKIT_NO_ISOLATION=1 (in-process) or a larger "
                                          "EDGEKIT_NATIVE_TIMEOUT_S; report it with the model attached")
    stderr = (errors[0] if errors else b"").decode("utf-8", "replace")
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        tail = [line.strip() for line in stderr.splitlines() if line.strip()][-STDERR_TAIL_LINES:]
        said = ("; it printed:\n    " + "\n    ".join(tail)) if tail else "; it printed nothing"
        raise NativeCrashError(f"{step} crashed inside native code ({name}, signal {number}){said}",
                               fix=fix or "report it with the model attached; edgekit itself is unaffected")
    if not result or not result[0]:
        raise NativeCrashError(f"{step} ended without a result (exit status {os.WEXITSTATUS(status)})",
                               fix=fix or "report it with the model attached")
    kind, value = pickle.loads(result[0])
    if kind == "error":
        raise ChildError(value[0], value[1], stderr)
    if stderr.strip():
        log.debug("%s printed:\n%s", step, stderr.strip())
    return value
