"""Start a local Ray for one run, and clean up after a start that fails.

A local ``ray.init`` on a heavily loaded machine sometimes fails with "The current node timed out during
startup" (the raylet gives up waiting for its agents). Such a failed start leaves its GCS and agent processes
running, and ``ray.shutdown()`` does not stop them (seen with ray 2.60). This module retries a start that timed
out and kills what each failed attempt left behind: the new child processes of this process.
"""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
from pathlib import Path
from typing import Any, Callable, List, Optional, Set

import psutil

from edgekit.errors import UserError, first_line

log = logging.getLogger(__name__)

START_ATTEMPTS = 3
LEFTOVER_WAIT_S = 10.0


def _child_pids() -> Set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def kill_new_children(before: Set[int]) -> List[int]:
    """Kill the child processes of this process that were not in ``before``; returns their pids."""
    leftovers = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    for p in leftovers:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(leftovers, timeout=LEFTOVER_WAIT_S)
    return [p.pid for p in leftovers]


def _is_startup_timeout(exc: BaseException) -> bool:
    return "timed out during startup" in str(exc)


def start_local_ray(ray: Any, num_cpus: int, attempts: int = START_ATTEMPTS,
                    init: Callable[..., Any] | None = None, **init_kwargs: Any) -> None:
    """``ray.init(num_cpus=...)`` for a local Ray; a start that times out is retried (``attempts`` in all),
    every failed attempt's leftover processes are killed, and the last failure becomes one UserError."""
    init = init or ray.init
    for attempt in range(1, attempts + 1):
        before = _child_pids()
        try:
            init(num_cpus=num_cpus, **init_kwargs)
            return
        except Exception as exc:  # ray raises a bare Exception for a startup timeout
            with contextlib.suppress(Exception):
                ray.shutdown()
            killed = kill_new_children(before)
            log.warning("local Ray did not start (attempt %d of %d: %s); killed %d leftover process(es)",
                        attempt, attempts, first_line(exc), len(killed))
            if attempt < attempts and _is_startup_timeout(exc):
                continue
            raise UserError(f"could not start a local Ray ({attempt} attempt(s)): {first_line(exc)}",
                            fix="the machine may be overloaded or out of memory/disk (/tmp/ray): retry when it is "
                                "quieter, stop stray Ray processes (`ray stop`), or join a running cluster with "
                                "--ray-address") from exc


def session_dir(ray: Any) -> Optional[Path]:
    """The session folder (``<ray temp>/session_<time>_<pid>``) of the Ray this process started, if known."""
    try:
        from ray._private import worker

        node = worker._global_node
        return Path(node.get_session_dir_path()) if node is not None else None
    except Exception:  # noqa: BLE001 - a private API: without it the folder is only not removed
        return None


def shutdown_local_ray(ray: Any, session: Optional[Path]) -> None:
    """``ray.shutdown()`` of a Ray this run started, then remove its session folder (logs, sockets, spilled
    objects: Ray keeps it in the temp dir after a shutdown) and the ``session_latest`` link if it points there."""
    ray.shutdown()
    if session is None or not session.name.startswith("session_"):
        return
    shutil.rmtree(session, ignore_errors=True)
    latest = session.parent / "session_latest"
    with contextlib.suppress(OSError):
        if latest.is_symlink() and Path(os.path.realpath(latest)) == Path(os.path.realpath(session)):
            latest.unlink()
    log.debug("removed the Ray session folder %s", session)
