"""SIGTERM and SIGHUP stop every command the way Ctrl-C does (issue 27): real signals to real `edgekit` processes.

Each test starts the CLI as a subprocess with its own TMPDIR, waits for a state it can see (QEMU running, the
temp folder created), sends the signal, and checks: exit 128+N, one message naming the signal, no traceback,
no QEMU left running, no QEMU working folder, no temp folder, no output or staging folder.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List, Optional

import pytest

from tests.conftest import DEMO_MODEL, DIGITS, MLPERF, REPO

needs_qemu = pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                                reason="qemu-system-arm or arm-none-eabi-gcc is not installed")
SIGNALS = [pytest.param(signal.SIGTERM, id="SIGTERM"), pytest.param(signal.SIGHUP, id="SIGHUP")]
WAIT_S = 240  # upper bound for the state to appear (never reached when things work; not a timing assertion)


def _default_signals() -> None:
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, signal.SIG_DFL)


def start_cli(tmp_path: Path, *args: object) -> subprocess.Popen:
    """`python -m edgekit.cli ARGS` in its own session with TMPDIR=tmp_path/tmp (so its temp folders can be seen)."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    # torch keeps a compile cache in TMPDIR on purpose (not a leftover): put it elsewhere
    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONPATH": str(REPO),
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "torch-cache")}
    return subprocess.Popen([sys.executable, "-m", "edgekit.cli", *map(str, args)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_signals, start_new_session=True)


def descendants(pid: int) -> List[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for(proc: subprocess.Popen, what: str, check: Callable[[], Optional[object]]) -> object:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"edgekit exited ({proc.returncode}) before {what}:\n{out}\n{err}")
        time.sleep(0.1)
    proc.kill()
    pytest.fail(f"{what} did not happen within {WAIT_S} s")


def qemu_child(proc: subprocess.Popen) -> Optional[int]:
    """The QEMU that runs the firmware: its command line names the UART socket.

    A ``qemu-system-arm --version`` probe (tool versions for the report) is a
    QEMU child too, for a few milliseconds, and must not be taken for it.
    """
    return next((p for p in descendants(proc.pid)
                 if "qemu-system-arm" in cmdline(p) and "uart.sock" in cmdline(p)), None)


def stop_and_check(proc: subprocess.Popen, signum: int, tmp_path: Path, *, qemu: Optional[int] = None) -> str:
    """Send ``signum``; check exit code, message, no traceback, nothing left. Returns stderr."""
    workdir = None
    if qemu is not None:
        match = re.search(r"path=(/\S+?)/uart\.sock", cmdline(qemu))
        workdir = Path(match.group(1)) if match else None
        assert workdir is not None and workdir.is_dir(), cmdline(qemu)
    proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"edgekit did not stop on {signal.Signals(signum).name}:\n{err}")
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, (proc.returncode, err)
    assert f"stopped by {name}; no output written" in err, err
    assert "Traceback" not in err, err
    leftovers = [p for p in descendants(proc.pid) if alive(p)]
    assert not leftovers, [cmdline(p) for p in leftovers]
    if qemu is not None:
        assert not alive(qemu), f"QEMU {qemu} still runs after {name}"
        assert not workdir.exists(), f"QEMU working folder {workdir} left behind"
    assert not any((tmp_path / "tmp").iterdir()), list((tmp_path / "tmp").iterdir())
    assert not (tmp_path / "out").exists()
    assert not [p.name for p in tmp_path.iterdir() if ".partial-" in p.name or ".old-" in p.name or ".lock" in p.name]
    return err


@pytest.fixture(scope="module")
def ad_firmware(tmp_path_factory) -> Path:
    """The MLPerf Tiny AD model as a built firmware project for mps2-an386 (built once for the module)."""
    from edgekit.cli import main

    out = tmp_path_factory.mktemp("signals") / "fw"
    assert main(["firmware", str(MLPERF / "ad_autoencoder_int8.tflite"), "--board", "mps2-an386", "--build",
                 "-o", str(out)]) == 0
    return out


@needs_qemu
@pytest.mark.parametrize("signum", SIGNALS)
def test_run_on_qemu_stops_qemu_and_writes_nothing(tmp_path, ad_firmware, signum):
    proc = start_cli(tmp_path, "run", ad_firmware, "--device", "qemu:mps2-an386", "-n", 10 ** 8, "-o", tmp_path / "out")
    qemu = wait_for(proc, "QEMU started", lambda: qemu_child(proc))
    stop_and_check(proc, signum, tmp_path, qemu=qemu)


def test_quantize_removes_its_temp_folder(tmp_path):
    proc = start_cli(tmp_path, "quantize", DEMO_MODEL, "--calib", DIGITS / "calib", "-o", tmp_path / "out")
    wait_for(proc, "quantize's temp folder created", lambda: list((tmp_path / "tmp").glob("edgekit-quantize-*")))
    stop_and_check(proc, signal.SIGTERM, tmp_path)


@pytest.mark.slow
@needs_qemu
def test_deploy_removes_its_staging_folder_and_qemu(tmp_path):
    proc = start_cli(tmp_path, "deploy", DEMO_MODEL, "--calib", DIGITS / "calib", "--board", "mps2-an386",
                     "-o", tmp_path / "out")
    wait_for(proc, "deploy's staging folder created", lambda: list(tmp_path.glob(".out.partial-*")))
    qemu = wait_for(proc, "QEMU started", lambda: qemu_child(proc))
    stop_and_check(proc, signal.SIGTERM, tmp_path, qemu=qemu)


def test_signal_handlers_are_restored_after_main(cli, tmp_path):
    """In-process callers (tests, notebooks) get their own handlers back after edgekit.cli.main."""
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    cli("verify", tmp_path / "missing")
    assert {s: signal.getsignal(s) for s in before} == before


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_inside_signals_deferred_is_acted_on_when_the_block_ends(signum):
    """Cleanup that must finish runs to its end; the first signal then raises as it would have, handlers restored."""
    from edgekit.interrupts import Terminated, signals_as_interrupt, signals_deferred

    steps = []
    with signals_as_interrupt():
        before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        with pytest.raises(KeyboardInterrupt) as caught:
            with signals_deferred():
                os.kill(os.getpid(), signum)
                os.kill(os.getpid(), signal.SIGHUP)  # a second signal: only the first is acted on
                steps.append("cleanup finished")
        after = {s: signal.getsignal(s) for s in before}
        if signum == signal.SIGTERM:  # raise_terminated, the handler that acted, ignores later SIGTERM/SIGHUP
            before.update({signal.SIGTERM: signal.SIG_IGN, signal.SIGHUP: signal.SIG_IGN})
        assert after == before
    assert steps == ["cleanup finished"]
    assert isinstance(caught.value, Terminated) == (signum == signal.SIGTERM)
    assert getattr(caught.value, "signum", signal.SIGINT) == signum
