"""Which module provides the runner for each kind of device; modules register into base.RUNNERS on import."""
from __future__ import annotations

import importlib
import logging

from edgekit.errors import UserError
from edgekit.run.base import RUNNERS

log = logging.getLogger(__name__)

RUNNER_MODULES = (
    "edgekit.run.runners.host",   # host, macos
    "edgekit.run.runners.ssh",    # ssh
    "edgekit.run.runners.adb",    # adb
    "edgekit.run.runners.mcu",    # qemu, serial (firmware boards)
    "edgekit.boardlab.runner",  # labgrid (boards of a labgrid lab)
)
_loaded = False


def load_runner_modules() -> None:
    """Import every runner module once; a module that is not part of this build is skipped."""
    global _loaded
    if _loaded:
        return
    for name in RUNNER_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            log.debug("runner module %s is not installed", name)
    _loaded = True


def runner_class(kind: str) -> type:
    load_runner_modules()
    if kind not in RUNNERS and kind in ("qemu", "serial"):
        raise UserError(f"no runner for {kind} devices in this build (edgekit.run.runners.mcu is missing)",
                        fix="install edgekit with its firmware support")
    return RUNNERS.get(kind)
