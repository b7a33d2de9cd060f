"""Device profiles: one YAML file per device in devices/ (name, kind, figures, how to reach it).

Common keys (validated here): ``name`` (= file stem), ``kind`` (mcu | linux | android | host | macos),
``description``. Kind-specific keys (core, clock_hz, memory, connection, power_model, thermal, ...)
are validated by the code that uses them. ``EDGEKIT_DEVICES_DIR`` adds a folder of user profiles.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List

import yaml

from edgekit._resources import data_dir
from edgekit.errors import UnknownNameError, UserError

PROFILE_KINDS = ("mcu", "linux", "android", "host", "macos")
# a parsed device YAML: the common keys are checked here, the kind-specific ones by the code that reads them
Profile = Dict[str, Any]
BUILTIN_DIR = data_dir("devices")


def profile_dirs() -> List[Path]:
    dirs = [BUILTIN_DIR]
    extra = os.environ.get("EDGEKIT_DEVICES_DIR")
    if extra:
        dirs.append(Path(extra))
    return dirs


def _read(path: Path) -> Profile:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"device profile {path} cannot be read: {exc}", fix="fix the YAML syntax") from exc
    problems = []
    if not isinstance(data, dict):
        raise UserError(f"device profile {path} is not a mapping", fix="write key: value pairs")
    if data.get("name") != path.stem:
        problems.append(f"name {data.get('name')!r} must equal the file name {path.stem!r}")
    if data.get("kind") not in PROFILE_KINDS:
        problems.append(f"kind {data.get('kind')!r} must be one of {', '.join(PROFILE_KINDS)}")
    if not isinstance(data.get("description"), str):
        problems.append("description (text) is missing")
    if problems:
        raise UserError(f"device profile {path}: " + "; ".join(problems), fix="see devices/README.md for the keys")
    data["_path"] = str(path)
    return data


@lru_cache(maxsize=None)
def _all(dirs: tuple) -> Dict[str, Profile]:
    profiles: Dict[str, Profile] = {}
    for folder in dirs:
        for path in sorted(Path(folder).glob("*.yaml")):
            profiles[path.stem] = _read(path)
    return profiles


def all_profiles() -> Dict[str, Profile]:
    """Every profile by name (user folder overrides built-in ones of the same name)."""
    return dict(_all(tuple(str(d) for d in profile_dirs())))


def load_profile(name: str) -> Profile:
    profiles = all_profiles()
    if name not in profiles:
        raise UnknownNameError("device profile", name, profiles)
    return dict(profiles[name])
