"""A full disk, a quota, a file-size limit or a read-only filesystem is the user's machine, not a bug in edgekit.

``disk_error`` turns such an ``OSError`` (ENOSPC, EDQUOT, EFBIG, EROFS) into one ``DiskSpaceError`` that names
the path, the free space there and what the step needed (as far as it is known: the bytes written before the
failure); ``disk_error_in`` finds such an error in an exception's cause chain; ``tool_disk_error`` recognises the
same failures in the output of a child tool (make, gcc, the linker).
"""
from __future__ import annotations

import errno
import os
import resource
import shutil
from pathlib import Path
from typing import Optional

from edgekit.errors import UserError

DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}
# how tools (gcc, ld, make, coreutils) print the same errno values; SIGXFSZ = a child past `ulimit -f`
_TOOL_TEXT = {"No space left on device": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT,
              "File too large": errno.EFBIG, "File size limit exceeded": errno.EFBIG,
              "Read-only file system": errno.EROFS}


class DiskSpaceError(UserError):
    """No room to write the output: full filesystem, quota, file-size limit (ulimit -f) or read-only mount."""

    def __init__(self, message: str, *, fix: str, code: int = errno.ENOSPC, path: Optional[Path] = None,
                 cause: str = "") -> None:
        super().__init__(message, fix=fix)
        self.code, self.path, self.cause = code, path, cause


def mib(n: float) -> str:
    """A byte count for people: 512 B, 16.0 KiB, 1.5 MiB, 2.0 GiB."""
    for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def _existing(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def free_bytes(path: Path) -> Optional[int]:
    try:
        return shutil.disk_usage(_existing(path)).free
    except OSError:
        return None


def last_written(folder: Path) -> Optional[str]:
    """The path (relative to ``folder``) of the most recently modified file under it: the file a write that did not
    name its file (``write()`` errors carry no file name) was most likely writing."""
    newest, when = None, -1.0
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            try:
                mtime = os.lstat(path).st_mtime_ns
            except OSError:
                continue
            if mtime >= when:
                newest, when = path, mtime
    return os.path.relpath(newest, folder) if newest else None


def folder_bytes(folder: Path) -> int:
    """Bytes of every file under ``folder`` (0 when it is gone)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def disk_error(code: int, path: Path, *, target: Optional[Path] = None, written: Optional[int] = None,
               cause: str = "") -> DiskSpaceError:
    """The message for errno ``code`` writing ``path`` (``target``: the output folder it was for; ``written``:
    bytes the step had written when it failed, a lower bound of the space it needs)."""
    path = Path(path)
    where = Path(target) if target is not None else path
    free = free_bytes(where)
    kept = dict(code=code, path=path, cause=cause)
    needed = f"; it needs more than the {mib(written)} it had written" if written else ""
    said = f" ({cause})" if cause else ""
    if code == errno.EFBIG:
        soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
        limit = "unlimited" if soft == resource.RLIM_INFINITY else f"{mib(soft)} ({soft:,} bytes)"
        return DiskSpaceError(
            f"cannot write {path}: file too large (EFBIG){said}; this process's file-size limit (ulimit -f) is "
            f"{limit}{needed}", fix="raise the limit (`ulimit -f unlimited`) or write -o to a filesystem that allows "
                                    "larger files; nothing was written", **kept)
    if code == errno.EROFS:
        return DiskSpaceError(f"cannot write {path}: the filesystem is read-only (EROFS){said}",
                              fix="pass -o a folder on a writable filesystem (and TMPDIR if it is the temp folder)",
                              **kept)
    what = "the disk quota is used up (EDQUOT)" if code == errno.EDQUOT else "no space left on the device (ENOSPC)"
    room = f"{mib(free)} free at {_existing(where)}" if free is not None else "free space unknown"
    return DiskSpaceError(f"cannot write {path}: {what}{said}; {room}{needed}",
                          fix="free some space there (or raise the quota), or pass -o a folder on another filesystem "
                              "(TMPDIR for temporary files); nothing was written", **kept)


def from_oserror(exc: OSError, *, target: Optional[Path] = None, written: Optional[int] = None) -> DiskSpaceError:
    path = Path(exc.filename) if exc.filename else (Path(target) if target is not None else Path("the output"))
    return disk_error(exc.errno, path, target=target, written=written)


def disk_error_in(exc: BaseException) -> Optional[OSError]:
    """The first disk-space OSError in ``exc``'s cause/context chain, or None."""
    seen, link = set(), exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, OSError) and link.errno in DISK_ERRNOS:
            return link
        link = link.__cause__ or link.__context__
    return None


def tool_disk_error(output: str, path: Path, *, returncode: Optional[int] = None,
                    target: Optional[Path] = None) -> Optional[DiskSpaceError]:
    """A DiskSpaceError when a tool's ``output`` (or its death by SIGXFSZ) says it ran out of room writing under
    ``path``; None otherwise."""
    for text, code in _TOOL_TEXT.items():
        if text in output:
            line = next(line.strip() for line in output.splitlines() if text in line)
            return disk_error(code, path, target=target, written=folder_bytes(path), cause=line[-300:])
    if returncode is not None and returncode in (-25, 128 + 25, 153):  # SIGXFSZ: killed at the file-size limit
        return disk_error(errno.EFBIG, path, target=target, written=folder_bytes(path), cause="a tool was killed by SIGXFSZ")
    return None


def in_output_folder(exc: BaseException, staging: Path, outdir: Path) -> Optional[DiskSpaceError]:
    """For an error raised while ``staging`` (the folder that becomes ``outdir``) was being written: the
    DiskSpaceError to show, naming ``outdir`` (not the staging folder, which is removed) and the bytes written,
    or None when ``exc`` is not a disk-space failure. Call it before the staging folder is removed."""
    if isinstance(exc, DiskSpaceError):
        code, path, cause = exc.code, exc.path, exc.cause
    elif isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
        code, path, cause = exc.errno, Path(exc.filename) if exc.filename else None, ""
    else:
        return None
    staging, outdir = Path(os.path.abspath(staging)), Path(outdir)
    absolute = Path(os.path.abspath(path)) if path is not None else None
    if absolute is not None and absolute.is_relative_to(staging):
        shown = outdir / absolute.relative_to(staging) if absolute != staging else outdir
    elif absolute is None:
        last = last_written(staging)
        shown = outdir / last if last else outdir
    else:
        shown = path  # outside the output folder (the temp folder): keep its name
    cause = cause.replace(str(staging), str(outdir))
    return disk_error(code, shown, target=staging.parent, written=folder_bytes(staging), cause=cause)
