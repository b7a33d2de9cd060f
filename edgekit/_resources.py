"""Where edgekit finds the files it ships (firmware sources, device profiles, calibration sets) and where it
caches what it builds from them.

A wheel installs the repository's top-level data folders as package data under ``edgekit/_data/<name>``
(pyproject.toml maps them there); a source checkout keeps them at the repository root next to ``edgekit/``.
Both are located through ``importlib.resources``, so no module counts ``Path(__file__).parents``.
"""
from __future__ import annotations

import os
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

from edgekit.errors import InternalError

DATA_DIRS = ("firmware", "devices", "calibration_data")


def _package_dir() -> Path:
    root = files("edgekit")
    if not isinstance(root, Path):  # a zip import: gcc and QEMU need real files
        raise InternalError(f"edgekit is installed as {root!r}, not as a folder; install it with pip (not as a zip)")
    return root.resolve()


@lru_cache(maxsize=None)
def data_dir(name: str) -> Path:
    """The folder of shipped data ``name`` (one of DATA_DIRS), installed or in a checkout."""
    if name not in DATA_DIRS:
        raise InternalError(f"unknown data folder {name!r}; edgekit ships {', '.join(DATA_DIRS)}")
    package = _package_dir()
    for candidate in (package / "_data" / name, package.parent / name):
        if candidate.is_dir():
            return candidate
    raise InternalError(f"edgekit's {name}/ folder is missing (looked in {package / '_data'} and {package.parent})",
                        fix="reinstall edgekit (pip install edgekit-*.whl) or restore the checkout")


def is_checkout() -> bool:
    """True when edgekit runs from a source checkout (its data folders beside the package)."""
    return not (_package_dir() / "_data").is_dir()


def build_root() -> Path:
    """Where host-built helpers (QEMU plugin, host runtime) are cached: $EDGEKIT_BUILD_DIR, else <checkout>/build,
    else (installed) $XDG_CACHE_HOME/edgekit/build, never inside site-packages."""
    env = os.environ.get("EDGEKIT_BUILD_DIR")
    if env:
        return Path(env)
    if is_checkout():
        return _package_dir().parent / "build"
    return Path(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))) / "edgekit" / "build"
