"""Full disk, quota, file-size limit, read-only filesystem (issue 27): one message naming the path and the space,
exit 2, no traceback, nothing left behind.

Real failures: EFBIG from RLIMIT_FSIZE (`ulimit -f`, set in the child before exec) for firmware, quantize and run;
ENOSPC from a small tmpfs for `firmware --build` (needs mount rights: skipped, with the reason, where the sandbox
has none). The errno -> message mapping of ENOSPC/EDQUOT/EROFS is also checked by raising the OSError inside a real
output folder, and the tool-output recognition on the lines gcc/as/ld print.
"""
from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Callable, List

import pytest

from edgekit.diskspace import DiskSpaceError, tool_disk_error
from tests.conftest import DEMO_MODEL, DIGITS, MLPERF, REPO

AD_INT8 = MLPERF / "ad_autoencoder_int8.tflite"


def run_limited(tmp_path: Path, args: List[object], *, fsize_bytes: int | None = None) -> subprocess.CompletedProcess:
    def limit() -> None:
        if fsize_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_bytes, fsize_bytes))

    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(tmp_path / "tmp"),
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "torch-cache")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "edgekit.cli", *map(str, args)], cwd=REPO, env=env, text=True,
                          capture_output=True, preexec_fn=limit, timeout=600)


def check_refused(done: subprocess.CompletedProcess, out: Path, *fragments: str) -> None:
    err = done.stderr
    assert done.returncode == 2, (done.returncode, err)
    assert "Traceback" not in err and "bug in edgekit" not in err, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    assert not out.exists(), f"{out} was left behind"
    assert not [p.name for p in out.parent.iterdir() if ".partial-" in p.name or ".old-" in p.name]


EFBIG_CASES = [
    pytest.param(lambda out: ["firmware", AD_INT8, "--board", "mps2-an386", "-o", out], 256 * 1024,
                 "model/model_data.c: file too large (EFBIG)", id="firmware"),
    pytest.param(lambda out: ["quantize", DEMO_MODEL, "--calib", DIGITS / "calib", "-o", out], 16 * 1024,
                 "file too large (EFBIG)", id="quantize"),
    pytest.param(lambda out: ["run", AD_INT8, "--device", "host", "-n", "3", "-o", out], 4 * 1024,
                 "file too large (EFBIG)", id="run-host"),
]


@pytest.mark.parametrize("argv,limit,fragment", EFBIG_CASES)
def test_file_size_limit_is_one_message(tmp_path, argv: Callable[[Path], list], limit: int, fragment: str):
    out = tmp_path / "out"
    done = run_limited(tmp_path, argv(out), fsize_bytes=limit)
    check_refused(done, out, fragment, f"ulimit -f) is {limit // 1024}.0 KiB", str(out), "Fix: raise the limit")
    assert not any((tmp_path / "tmp").iterdir())


def _mount_tmpfs(folder: Path, size: int) -> bool:
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    return done.returncode == 0


def _disk_bytes(folder: Path) -> int:
    """Bytes a tree takes on a filesystem of 4 KiB blocks (tmpfs charges whole pages)."""
    return sum(-(-f.stat().st_size // 4096) * 4096 for f in folder.rglob("*") if f.is_file())


@pytest.mark.slow
def test_firmware_build_on_a_full_filesystem_is_not_a_bug(tmp_path):
    """A tmpfs that holds the generated sources but not the build: gcc/as fail with ENOSPC inside make."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    sources = tmp_path / "sources"
    done = run_limited(tmp_path, ["firmware", AD_INT8, "--board", "mps2-an386", "-o", sources])
    assert done.returncode == 0, done.stderr
    size = _disk_bytes(sources) + 256 * 1024  # the sources and their records fit; the objects and the ELF do not
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, size):
        pytest.skip("this sandbox does not allow `mount -t tmpfs` (no CAP_SYS_ADMIN)")
    try:
        out = disk / "fw"
        done = run_limited(tmp_path, ["firmware", AD_INT8, "--board", "mps2-an386", "--build", "-o", out])
        check_refused(done, out, f"cannot write {out}", "no space left on the device (ENOSPC)", f"free at {disk}",
                      "it needs more than the", "Fix: free some space")
        assert list(disk.iterdir()) == []
    finally:
        subprocess.run(["umount", str(disk)], check=False)


MAPPING = [
    pytest.param(errno.ENOSPC, "no space left on the device (ENOSPC)", "free some space", id="ENOSPC"),
    pytest.param(errno.EDQUOT, "the disk quota is used up (EDQUOT)", "raise the quota", id="EDQUOT"),
    pytest.param(errno.EROFS, "the filesystem is read-only (EROFS)", "writable filesystem", id="EROFS"),
    pytest.param(errno.EFBIG, "file too large (EFBIG)", "ulimit -f unlimited", id="EFBIG"),
]


@pytest.mark.parametrize("code,words,fix", MAPPING)
def test_errno_inside_an_output_folder_names_the_file_and_the_bytes_written(tmp_path, code, words, fix):
    from edgekit.atomic import atomic_output_dir

    out = tmp_path / "out"
    with pytest.raises(DiskSpaceError) as info:
        with atomic_output_dir(out) as stage:
            (stage / "weights.bin").write_bytes(b"\0" * 3000)
            raise OSError(code, os.strerror(code), str(stage / "model.c"))
    text = str(info.value)
    assert f"cannot write {out / 'model.c'}: {words}" in text and fix in info.value.fix
    if code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        assert "it needs more than the 2.9 KiB it had written" in text
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("code,words,fix", MAPPING)
def test_cli_maps_a_wrapped_disk_error_instead_of_calling_it_a_bug(code, words, fix, cli, capsys, monkeypatch, tmp_path):
    from edgekit import cli as cli_module
    from edgekit.errors import InternalError

    def command(args):
        try:
            raise OSError(code, os.strerror(code), str(tmp_path / "x.o"))
        except OSError as exc:
            raise InternalError("a step failed") from exc

    monkeypatch.setattr(cli_module, "_check_outdir", command)
    assert cli("devices") == 2
    err = capsys.readouterr().err
    assert words in err and str(tmp_path / "x.o") in err and "bug in edgekit" not in err and "Traceback" not in err


TOOL_LINES = [
    ("/tmp/cc1.s: Fatal error: can't write 3919 bytes to section .rodata of build/m.o: 'No space left on device'",
     None, "ENOSPC"),
    ("ld: final link failed: Disk quota exceeded", None, "EDQUOT"),
    ("cc1: error: build/m.o: File too large", None, "EFBIG"),
    ("make: *** [Makefile:20: build/m.o] Error 1", -25, "EFBIG"),
    ("cc1: fatal error: cannot open build/m.o: Read-only file system", None, "EROFS"),
]


@pytest.mark.parametrize("line,returncode,name", TOOL_LINES, ids=[t[2] + str(i) for i, t in enumerate(TOOL_LINES)])
def test_tool_output_is_recognised(tmp_path, line, returncode, name):
    error = tool_disk_error(f"gcc -c x.c\n{line}\n", tmp_path, returncode=returncode)
    assert error is not None and f"({name})" in str(error)


def test_an_ordinary_build_error_is_not_a_disk_error(tmp_path):
    assert tool_disk_error("x.c:3:1: error: expected ';' before '}' token", tmp_path, returncode=2) is None
