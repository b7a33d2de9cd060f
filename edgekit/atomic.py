"""Atomic output folders: a failed command leaves no partial content behind, a new run never mixes with an old one.

``check_output_dir`` is called before any work (the CLI does it for every command with ``-o``); it refuses an
output location that cannot become a folder, or a non-empty folder edgekit did not write. ``atomic_output_dir``
builds the new content in a staging folder beside the target and then replaces the target folder as a whole.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from edgekit.errors import UserError
from edgekit.outlock import output_lock

log = logging.getLogger(__name__)

# A folder holding one of these was written by edgekit (each command writes at least one of them).
EDGEKIT_FILES = ("manifest.json", "firmware.json", "run.json", "library.json")


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one rename: a reader never sees, and an interrupted run never leaves, a
    half-written file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    log.debug("wrote %s", path)


def written_by_edgekit(folder: Path) -> bool:
    """True when ``folder`` holds an edgekit record (manifest.json, firmware.json or run.json)."""
    return any((Path(folder) / name).is_file() for name in EDGEKIT_FILES)


def check_output_dir(outdir: Path, *, inputs: Iterable[Path] = ()) -> None:
    """Refuse, before any work, an output location edgekit cannot (or must not) replace with a new folder.

    Refused: an existing file; a path under a file; a place where no folder can be created (read-only, /proc);
    a non-empty folder edgekit did not write; a folder that holds one of the command's ``inputs``.
    """
    outdir = Path(outdir)
    fix = "pass -o a new folder, or one that an earlier edgekit run wrote"
    absolute = Path(os.path.abspath(outdir))
    if absolute.exists() and not absolute.is_dir():
        raise UserError(f"output folder {outdir} exists and is a file, not a folder", fix=fix)
    existing = absolute
    while not existing.exists():
        existing = existing.parent
    if absolute != existing and not existing.is_dir():
        raise UserError(f"output folder {outdir} cannot be created: {existing} is a file, not a folder", fix=fix)
    if absolute.exists():
        if absolute == Path(os.path.abspath(os.sep)) or absolute == Path.cwd() or absolute == Path.home():
            raise UserError(f"output folder {outdir} is {absolute}; edgekit replaces its output folder as a whole", fix=fix)
        if any(absolute.iterdir()) and not written_by_edgekit(absolute):
            raise UserError(
                f"output folder {outdir} is not empty and was not written by edgekit "
                f"(no {', '.join(EDGEKIT_FILES)}); edgekit replaces its output folder as a whole",
                fix="pass -o a new or empty folder, or remove the files in it first",
            )
        for item in inputs:
            item = Path(os.path.abspath(item))
            if item == absolute or absolute in item.parents:
                raise UserError(f"output folder {outdir} holds the input {item}; writing it would delete that input",
                                fix="pass -o another folder")
    _probe_writable(existing if existing != absolute else absolute.parent, outdir)


def _probe_writable(folder: Path, outdir: Path) -> None:
    """Create and remove an empty folder in ``folder``: the only test that catches read-only mounts and /proc."""
    try:
        probe = tempfile.mkdtemp(prefix=".edgekit-probe-", dir=folder)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UserError(f"output folder {outdir} cannot be created: {folder} is not writable ({reason})",
                        fix="pass -o a folder in a writable place (for example under out/)") from exc
    os.rmdir(probe)


@contextmanager
def atomic_output_dir(outdir: Path) -> Iterator[Path]:
    """Yield a staging folder; on success it replaces ``outdir`` as a whole.

    On any exception the staging folder is removed and ``outdir`` is left exactly as it was (not created if it
    did not exist). An existing ``outdir`` must be empty or written by edgekit (see ``check_output_dir``); its
    old content is removed, never mixed with the new.
    """
    outdir = Path(outdir)
    check_output_dir(outdir)
    parent = Path(os.path.abspath(outdir)).parent
    parent.mkdir(parents=True, exist_ok=True)
    with output_lock(outdir), _staged(outdir, parent) as staging:  # a second run on the same folder fails at once
        yield staging


@contextmanager
def _staged(outdir: Path, parent: Path) -> Iterator[Path]:
    """The staging folder beside ``outdir``: removed on any exception, moved into place on success."""
    staging = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.partial-", dir=parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(staging, 0o777 & ~umask)  # mkdtemp makes it 0700; give it a normal folder's mode
    try:
        yield staging
    except BaseException as exc:
        from edgekit.diskspace import in_output_folder

        disk = in_output_folder(exc, staging, outdir)  # full disk, quota, ulimit -f, read-only: measured before cleanup
        shutil.rmtree(staging, ignore_errors=True)
        if disk is not None:
            raise disk from exc
        raise
    _replace_folder(staging, outdir)
    log.debug("wrote %s", outdir)


def _replace_folder(staging: Path, outdir: Path) -> None:
    """Move ``staging`` to ``outdir``; an old ``outdir`` is moved aside first and removed once the new one is in place."""
    if not outdir.exists():
        os.replace(staging, outdir)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.old-", dir=staging.parent))
    try:
        os.replace(outdir, old / "content")
        try:
            os.replace(staging, outdir)
        except BaseException:
            os.replace(old / "content", outdir)  # put the previous result back
            raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)
