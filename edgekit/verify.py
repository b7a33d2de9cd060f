"""Integrity of an output folder: re-hash every artifact against the sha256 its manifest.json recorded, and a
firmware project's model and image against firmware.json. A file edited, corrupted or replaced after edgekit
wrote it is named, with both hashes."""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from edgekit.errors import UserError
from edgekit.provenance import sha256_file

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
FIRMWARE_JSON = "firmware.json"


@dataclass(frozen=True)
class Check:
    path: Path           # the file checked
    recorded_in: Path    # the manifest.json / firmware.json holding the expected hash
    expected: str
    actual: Optional[str]  # None: the file is missing

    @property
    def ok(self) -> bool:
        return self.actual == self.expected

    def describe(self, base: Optional[Path] = None) -> str:
        """One line; paths relative to ``base`` (the verified folder) when given."""
        path, record = self.path, self.recorded_in
        if base is not None:
            try:
                path, record = self.path.relative_to(base), self.recorded_in.relative_to(base)
            except ValueError:
                pass
        if self.actual is None:
            return f"{path}: missing (listed in {record})"
        if not self.ok:
            return (f"{path}: changed since {record.name} was written "
                    f"(sha256 {self.actual[:12]}..., recorded {self.expected[:12]}...)")
        return f"{path}: ok"


@dataclass
class VerifyReport:
    folder: Path
    checks: List[Check] = field(default_factory=list)
    skipped: List[str] = field(default_factory=list)  # listed files outside the folder (e.g. the user's source model)

    @property
    def problems(self) -> List[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def ok(self) -> bool:
        return not self.problems


def _load(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{path} cannot be read as JSON: {exc}", fix="it was damaged; re-run the command that wrote it") from exc
    if not isinstance(data, dict):
        raise UserError(f"{path} is not an edgekit record (not a JSON object)")
    return data


_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _damaged(recorded_in: Path, where: str, value: object, what: str) -> UserError:
    return UserError(f"{recorded_in}: {where} is not {what} (got {value!r:.80}); the record is damaged",
                     fix="re-run the command that wrote the folder (its records cannot be trusted)")


def _check(path: Path, recorded_in: Path, expected: object, where: str = "sha256") -> Check:
    if not isinstance(expected, str) or not _SHA256.match(expected.lower()):
        raise _damaged(recorded_in, where, expected, "a sha256 (64 hex digits)")
    return Check(path, recorded_in, expected.lower(), sha256_file(path) if path.is_file() else None)


def manifest_checks(manifest_path: Path, skipped: Optional[List[str]] = None) -> List[Check]:
    """Every artifact of a manifest.json that lives in its folder (relative paths), re-hashed."""
    folder = manifest_path.parent
    checks = []
    artifacts = _load(manifest_path).get("artifacts") or []
    if not isinstance(artifacts, list):
        raise _damaged(manifest_path, "artifacts", artifacts, "a list")
    for i, entry in enumerate(artifacts):
        if not isinstance(entry, dict) or not entry.get("path") or not entry.get("sha256"):
            continue
        if not isinstance(entry["path"], str):
            raise _damaged(manifest_path, f"artifacts[{i}].path", entry["path"], "a path (text)")
        relative = Path(entry["path"])
        if entry.get("stage") == "source":  # the user's input, recorded as given on the command line (cwd-relative)
            if skipped is not None:
                skipped.append(f"{entry['path']} (the command's input, not an artifact of {folder})")
            continue
        if relative.is_absolute() or ".." in relative.parts:
            if skipped is not None:
                skipped.append(f"{entry['path']} (outside {folder}; stage {entry.get('stage')})")
            continue
        checks.append(_check(folder / relative, manifest_path, entry["sha256"], f"artifacts[{i}].sha256"))
    return checks


def firmware_checks(info_path: Path) -> List[Check]:
    """A firmware project's model.tflite (model.sha256) and, when built, its ELF (build.elf_sha256)."""
    folder, info = info_path.parent, _load(info_path)
    checks = []
    model = info.get("model") or {}
    build = info.get("build") or {}
    for key, value in (("model", model), ("build", build)):
        if not isinstance(value, dict):
            raise _damaged(info_path, key, value, "a mapping")
    for key, value in (("model.file", model.get("file")), ("build.elf", build.get("elf"))):
        if value is not None and not isinstance(value, str):
            raise _damaged(info_path, key, value, "a path (text)")
    if model.get("sha256") and model.get("file"):
        checks.append(_check(folder / model["file"], info_path, model["sha256"], "model.sha256"))
    if build.get("elf") and build.get("elf_sha256"):
        checks.append(_check(folder / build["elf"], info_path, build["elf_sha256"], "build.elf_sha256"))
    return checks


def verify_folder(folder: Path) -> VerifyReport:
    """Every manifest.json and firmware.json under ``folder`` (itself and sub-folders such as deploy's)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder} is not a folder", fix="pass an output folder written by edgekit (-o OUTDIR)")
    report = VerifyReport(folder)
    manifests = sorted(folder.rglob(MANIFEST))
    infos = sorted(folder.rglob(FIRMWARE_JSON))
    if not manifests and not infos:
        raise UserError(f"{folder} has no {MANIFEST} or {FIRMWARE_JSON} to verify against",
                        fix="pass a folder written by edgekit quantize, parity -o, compile, firmware or deploy")
    seen: Dict[Path, Check] = {}
    for path in manifests:
        for check in manifest_checks(path, report.skipped):
            seen.setdefault(check.path.resolve(), check)
    for path in infos:
        for check in firmware_checks(path):
            existing = seen.get(check.path.resolve())
            if existing is None or existing.ok:
                seen[check.path.resolve()] = check
    report.checks = sorted(seen.values(), key=lambda c: str(c.path))
    return report


def stale_warnings(artifact: Path) -> List[str]:
    """Warnings for `run` / `firmware`: the artifact (or, for a firmware project, its model and ELF) no longer has the
    sha256 recorded next to it. Empty when nothing records it or everything matches."""
    artifact = Path(artifact)
    candidates: List[Check] = []
    try:
        if artifact.is_file() and (artifact.parent / MANIFEST).is_file():
            candidates = [c for c in manifest_checks(artifact.parent / MANIFEST)
                          if c.path.resolve() == artifact.resolve()]
        for folder in (artifact, artifact.parent, artifact.parent.parent):
            if (folder / FIRMWARE_JSON).is_file():
                candidates += firmware_checks(folder / FIRMWARE_JSON)
                break
    except UserError as exc:
        return [exc.message]
    return [c.describe() for c in candidates if not c.ok]
