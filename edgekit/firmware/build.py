"""Build a generated firmware project with its own Makefile (the same `make` a user runs)."""
from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Dict, List

from edgekit.errors import DoesNotFitError, InternalError, ToolMissingError
from edgekit.progress import step_progress

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
    done = _run_make(cmd, env, timeout_s, project)
    output = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        overflows = _OVERFLOW.findall(output)
        if overflows:
            detail = "; ".join(f"{region} overflowed by {int(n):,} bytes" for region, n in overflows)
            raise DoesNotFitError(f"the firmware does not fit {board}: the linker reports {detail}",
                                  fix="choose a board with more memory or a smaller model")
        from edgekit.diskspace import tool_disk_error

        disk = tool_disk_error(output, project, returncode=done.returncode)
        if disk is not None:  # a full disk / quota / ulimit -f is the machine, not a bug in the generator
            raise disk
        raise InternalError(f"building the generated firmware failed (a bug in edgekit's generator or runtime):\n"
                            f"{output[-4000:]}")
    warnings = [line for line in done.stderr.splitlines() if "warning:" in line]
    if warnings:
        log.warning("firmware build warnings:\n%s", "\n".join(warnings[:20]))
    elf = project / build_dir / ELF_NAME
    if not elf.is_file():
        raise InternalError(f"make succeeded but {elf} is missing")
    return elf


def _gcc_steps(cmd: List[str], env: Dict[str, str]) -> int:
    """How many compile and link commands ``make`` will run (a dry run, ~50 ms): the progress total."""
    try:
        dry = subprocess.run([*cmd, "-n"], capture_output=True, text=True, timeout=60, env=env, check=False)
    except subprocess.TimeoutExpired:
        return 0
    return sum(1 for line in dry.stdout.splitlines() if _is_gcc_step(line))


def _is_gcc_step(line: str) -> bool:
    first = line.strip().split(" ", 1)[0]
    return first.endswith("gcc") and " -o " in line


def _run_make(cmd: List[str], env: Dict[str, str], timeout_s: float, project: Path) -> subprocess.CompletedProcess:
    """``make`` with every compile/link step it echoes reported to the CLI's progress display."""
    total = _gcc_steps(cmd, env)
    advance = step_progress("building firmware", total) if total else (lambda n: None)
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        lines: List[str] = []

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if _is_gcc_step(line):
                    advance(1)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise InternalError(f"building the firmware in {project} took longer than {timeout_s:.0f} s") from None
        finally:
            reader.join(timeout=10)
        err.seek(0)
        return subprocess.CompletedProcess(cmd, proc.returncode, "".join(lines), err.read())
