"""Atomic output folders: a failed command leaves no partial content behind."""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

log = logging.getLogger(__name__)


@contextmanager
def atomic_output_dir(outdir: Path) -> Iterator[Path]:
    """Yield a staging folder; on success its files replace their namesakes in ``outdir``.

    On any exception the staging folder is removed and ``outdir`` is left exactly
    as it was (not created if it did not exist).
    """
    outdir = Path(outdir)
    parent = outdir.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.partial-", dir=parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(staging, 0o777 & ~umask)  # mkdtemp makes it 0700; give it a normal folder's mode
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    created = not outdir.exists()
    try:
        if created:
            os.replace(staging, outdir)
            return
        for item in sorted(staging.iterdir()):
            target = outdir / item.name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            os.replace(item, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.debug("wrote %s", outdir)
