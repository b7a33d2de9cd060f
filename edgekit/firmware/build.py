"""Build a generated firmware project with its own Makefile (the same `make` a user runs)."""
from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

from edgekit.errors import DoesNotFitError, InternalError, ToolMissingError

log = logging.getLogger(__name__)

GCC = "arm-none-eabi-gcc"
GCC_INSTALL = "apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi"
ELF_NAME = "firmware.elf"
_OVERFLOW = re.compile(r"region [`'](\w+)' overflowed by (\d+) bytes")


def toolchain_available() -> bool:
    return shutil.which(GCC) is not None and shutil.which("make") is not None


def require_toolchain() -> None:
    if shutil.which("make") is None:
        raise ToolMissingError("make", "apt-get install make")
    if shutil.which(GCC) is None:
        raise ToolMissingError(GCC, GCC_INSTALL)


def make_project(project: Path, *, build_dir: str = "build", jobs: int = 2, timeout_s: float = 900.0,
                 board: str = "the board") -> Path:
    """Run ``make`` in a generated project; returns the ELF. A linker region overflow becomes DoesNotFitError."""
    require_toolchain()
    project = Path(project)
    cmd = ["make", "-C", str(project), f"-j{max(1, jobs)}", f"BUILD={build_dir}"]
    log.info("building firmware: %s", " ".join(cmd))
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "CFLAGS", "LDFLAGS")}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise InternalError(f"building the firmware in {project} took longer than {timeout_s:.0f} s") from None
    output = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        overflows = _OVERFLOW.findall(output)
        if overflows:
            detail = "; ".join(f"{region} overflowed by {int(n):,} bytes" for region, n in overflows)
            raise DoesNotFitError(f"the firmware does not fit {board}: the linker reports {detail}",
                                  fix="choose a board with more memory or a smaller model")
        raise InternalError(f"building the generated firmware failed (a bug in edgekit's generator or runtime):\n"
                            f"{output[-4000:]}")
    warnings = [line for line in done.stderr.splitlines() if "warning:" in line]
    if warnings:
        log.warning("firmware build warnings:\n%s", "\n".join(warnings[:20]))
    elf = project / build_dir / ELF_NAME
    if not elf.is_file():
        raise InternalError(f"make succeeded but {elf} is missing")
    return elf
