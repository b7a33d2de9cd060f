"""Run firmware on an emulated board: qemu-system-arm with the board's machine, the ELF, UART0 on a unix
socket (or a pty), semihosting on, and optionally the ekcount instruction-count plugin.

``QemuSession`` is the one thing callers need::

    with QemuSession(load_board("mps2-an386"), elf, count_instructions=True) as qemu:
        info = qemu.info                         # HELLO answered at boot
        result = qemu.infer([x])                 # InferResult + .instructions / .op_instructions
    # QEMU is killed and reaped on every way out of the block

Every wait has a timeout; a QEMU that exits, hangs at boot or hangs mid-inference raises DeviceError
with its exit status and the tail of its log.
"""
from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Dict, List, Optional, Sequence

import numpy as np

from edgekit.errors import DeviceError, ToolMissingError, UserError
from edgekit.firmware.boards import Board
from edgekit.firmware.plugin import PluginCounts, build_plugin, marker_addresses, parse_counts, plugin_argument
from edgekit.firmware.protocol import DeviceClient, DeviceInfo, InferResult, Transport
from edgekit.firmware.transport import SerialTransport, SocketTransport
from edgekit.interrupts import signals_deferred

log = logging.getLogger(__name__)

QEMU = "qemu-system-arm"
QEMU_INSTALL = "apt-get install qemu-system-arm"
PTY_LINE = re.compile(r"char device redirected to (\S+)")
# every QemuProcess not closed yet (strong references: one left by an interrupted caller is still closed at exit)
_LIVE: "set[QemuProcess]" = set()


def qemu_path() -> str:
    path = shutil.which(QEMU)
    if not path:
        raise ToolMissingError(QEMU, QEMU_INSTALL)
    return path


def qemu_version() -> str:
    out = subprocess.run([qemu_path(), "--version"], capture_output=True, text=True, timeout=30).stdout
    return out.splitlines()[0] if out else QEMU


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_LIVE):
        proc.close()


class QemuProcess:
    """One qemu-system-arm process running an ELF, with its UART connected as ``transport`` (uart="external":
the caller passes UART0's chardev in ``extra_args`` and connects to it; ``transport`` stays None)."""

    def __init__(self, board: Board, elf: Path, *, uart: str = "socket", plugin: Optional[str] = None,
                 icount: bool = False, connect_timeout_s: float = 10.0, extra_args: Sequence[str] = ()) -> None:
        if not board.is_qemu:
            raise UserError(f"board {board.name} is real hardware, not a QEMU board",
                            fix="flash it with edgekit.firmware.flash and talk to it over serial")
        if uart not in ("socket", "pty", "external"):
            raise UserError(f"uart must be socket, pty or external, not {uart!r}")
        self.board, self.elf = board, Path(elf)
        if not self.elf.is_file():
            raise UserError(f"firmware ELF {self.elf} does not exist", fix="build the firmware first")
        self.process: Optional[subprocess.Popen] = None
        self.transport: Optional[Transport] = None
        self._log: Optional[BinaryIO] = None
        self.workdir = Path(tempfile.mkdtemp(prefix="ekq-", dir="/tmp"))  # short: unix socket paths are limited
        _LIVE.add(self)  # from here on close() (or the exit hook) removes the folder, even if a signal lands now
        try:
            self._start(board, uart, plugin, icount, connect_timeout_s, extra_args)
        except BaseException as exc:  # a boot failure, or Ctrl-C / SIGTERM (edgekit.interrupts): nothing outlives it
            if not isinstance(exc, DeviceError) or self.process is None:
                self.close()
                raise
            self.wait_exit(1.0)
            detail = self.describe()
            self.close()
            raise DeviceError(f"{exc.message}\n{detail}", fix=exc.fix) from exc

    def _start(self, board: Board, uart: str, plugin: Optional[str], icount: bool, connect_timeout_s: float,
               extra_args: Sequence[str]) -> None:
        self.log_path = self.workdir / "qemu.log"
        self.socket_path = self.workdir / "uart.sock"
        cmd = [qemu_path(), "-M", board.qemu_machine, "-nodefaults", "-display", "none", "-no-reboot"]
        if uart == "socket":
            cmd += ["-chardev", f"socket,id=uart0,path={self.socket_path},server=on,wait=on", "-serial", "chardev:uart0"]
        elif uart == "pty":
            cmd += ["-serial", "pty"]
        if board.semihosting:
            cmd += ["-semihosting-config", "enable=on,target=native"]
        if icount:
            cmd += ["-icount", "shift=0,align=off,sleep=off"]
        if plugin:
            cmd += ["-plugin", plugin]
        cmd += [*extra_args, "-kernel", str(self.elf)]
        self.command = cmd
        self._log = open(self.log_path, "wb")
        self.started_at = time.monotonic()
        log.debug("starting %s", " ".join(cmd))
        self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        if uart == "external":  # the caller wired UART0 itself (extra_args) and connects to it
            return
        if uart == "socket":
            self.transport = SocketTransport.connect(self.socket_path, connect_timeout_s, alive=self.alive)
        else:
            self.transport = SerialTransport(self._wait_pty(connect_timeout_s))
        self.transport.description = f"QEMU {board.qemu_machine} UART0"

    def _wait_pty(self, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            match = PTY_LINE.search(self.log_text())
            if match:
                return match.group(1)
            if not self.alive():
                break
            time.sleep(0.02)
        raise DeviceError(f"QEMU did not report its UART pty within {timeout_s:.1f} s\n{self.describe()}")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def describe(self) -> str:
        """Exit status and log tail, for error messages (waits a moment for a QEMU that is just exiting)."""
        from edgekit.run.faults import exit_text, stopped

        code = self.process.poll()
        if code is None:
            code = self.wait_exit(0.5)
        running = "is stopped (SIGSTOP)" if stopped(self.process.pid) else "is still running"
        state = f"QEMU (pid {self.process.pid}) {running}" if code is None else \
            f"QEMU {exit_text(code)}" + (" (firmware fault)" if code == 3 else "")
        tail = self.log_text().strip().splitlines()[-12:]
        return state + (": log tail:\n    " + "\n    ".join(tail) if tail else "; its log is empty")

    def wait_exit(self, timeout_s: float) -> Optional[int]:
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        """Kill and reap QEMU, close the UART, remove the working folder. Safe to call twice. A Ctrl-C / SIGTERM
        that arrives meanwhile is acted on once this is done; an exception raised inside still ends QEMU (SIGKILL)
        and removes the folder."""
        with signals_deferred():
            try:
                if self.transport is not None:
                    self.transport.close()
                if self.alive():
                    from edgekit.run.faults import stopped

                    try:  # a stopped QEMU never handles SIGTERM: kill it at once
                        os.killpg(self.process.pid, signal.SIGKILL if stopped(self.process.pid) else signal.SIGTERM)
                    except ProcessLookupError:
                        pass
                    self.wait_exit(3.0)
            finally:
                if self.alive():  # no polite exit within 3 s, or an exception while waiting for it
                    try:
                        os.killpg(self.process.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    self.wait_exit(10.0)
                if self._log is not None and not self._log.closed:
                    self._log.close()
                _LIVE.discard(self)
                shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "QemuProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class CountedResult(InferResult):
    """An InferResult with the plugin's exact instruction counts (None when not counted)."""

    instructions: Optional[int] = None
    op_instructions: Optional[List[int]] = None
    instruction_classes: Optional[Dict[str, int]] = None  # per class (edgekit.firmware.plugin.InferenceCount)


class QemuSession:
    """Boot firmware in QEMU, say HELLO, run inferences; optional exact instruction counts."""

    def __init__(self, board: Board, elf: Path, *, count_instructions: bool = False, plugin_mode: str = "tb",
                 timeout_s: float = 60.0, boot_timeout_s: float = 15.0, uart: str = "socket",
                 icount: bool = False) -> None:
        self.board, self.elf = board, Path(elf)
        self.timeout_s = timeout_s
        self.counts_path: Optional[Path] = None
        self._counts_dir: Optional[Path] = None
        self.qemu: Optional[QemuProcess] = None
        plugin = None
        if count_instructions:
            addresses = marker_addresses(self.elf)
            if "ib" not in addresses or "ie" not in addresses:
                raise UserError(f"{self.elf} has no ek_marker_infer_begin/end symbols to count between",
                                fix="link firmware/boards/common/ek_markers.S and call the markers around inference")
        try:  # every way out (a boot failure, Ctrl-C / SIGTERM) removes the counts folder and QEMU's
            if count_instructions:
                self._counts_dir = Path(tempfile.mkdtemp(prefix="ekc-", dir="/tmp"))
                self.counts_path = self._counts_dir / "counts.txt"
                plugin = plugin_argument(build_plugin(), self.counts_path, addresses, plugin_mode)
            self.qemu = QemuProcess(board, self.elf, uart=uart, plugin=plugin, icount=icount,
                                    connect_timeout_s=boot_timeout_s)
            assert self.qemu.transport is not None
            self.client = DeviceClient(self.qemu.transport, timeout_s=timeout_s, context=self.qemu.describe)
            if uart == "pty":
                self.info: DeviceInfo = self._hello_over_pty(boot_timeout_s)
            else:
                self.client.wait_boot(timeout_s=boot_timeout_s)
                self.info = self.client.hello(timeout_s=boot_timeout_s)
            self.boot_s = time.monotonic() - self.qemu.started_at
            self._counted = 0
        except BaseException:
            self.close()
            raise

    def _hello_over_pty(self, timeout_s: float) -> DeviceInfo:
        """A pty drops what QEMU writes before the host opens it, so the BOOT frame may be gone: probe with HELLO."""
        deadline = time.monotonic() + timeout_s
        try:
            self.client.wait_boot(timeout_s=min(2.0, timeout_s))
        except DeviceError:
            log.debug("no BOOT frame on the pty (sent before it was opened); probing with HELLO")
        while True:
            remaining = deadline - time.monotonic()
            try:
                return self.client.hello(timeout_s=max(1.0, min(3.0, remaining)))
            except DeviceError:
                if time.monotonic() >= deadline or not self.qemu.alive():
                    raise

    def counts(self) -> PluginCounts:
        if self.counts_path is None:
            raise UserError("instruction counting is off for this session", fix="pass count_instructions=True")
        return parse_counts(self.counts_path)

    def infer(self, inputs: Sequence[np.ndarray], timeout_s: Optional[float] = None) -> CountedResult:
        try:
            result = self.client.infer(inputs, timeout_s)
        except DeviceError as exc:
            raise self.explain(exc, self.timeout_s if timeout_s is None else timeout_s) from None
        counted = CountedResult(**vars(result))
        if self.counts_path is not None:
            inferences = self.counts().inferences
            if len(inferences) <= self._counted:
                raise DeviceError(f"the instruction-count plugin recorded no inference end for inference "
                                  f"#{self._counted + 1}; the firmware must call ek_marker_infer_begin/end")
            current = inferences[self._counted]
            self._counted = len(inferences)
            counted.instructions = current.instructions
            counted.op_instructions = current.op_instructions
            counted.instruction_classes = current.classes
        return counted

    def explain(self, exc: DeviceError, timeout_s: float) -> DeviceError:
        """Say what happened to QEMU when an exchange failed: killed by a signal, exited, stopped, or (still
        running) the firmware's own silence or error; the exchange's message follows as detail."""
        from edgekit.run.faults import FIXES, HUNG, fault_of, process_fault, with_fault

        process = self.qemu.process
        code = process.poll()
        fault = fault_of(exc)
        kind = fault.kind if fault else None
        if code is None and kind == "disconnected":
            code = self.qemu.wait_exit(1.0)  # the UART closes as QEMU dies: let it finish dying
        found = process_fault(process.pid, code, f"QEMU {self.board.qemu_machine}", timeout_s)
        if found is None:
            if kind == HUNG:
                found = (HUNG, f"the firmware on QEMU {self.board.qemu_machine} sent no reply within {timeout_s:g} s "
                               "(hung inference; QEMU still runs)")
            else:
                return exc
        fault_kind, headline = found
        fix = exc.fix if code == 3 else FIXES[fault_kind]  # exit 3: the firmware's own fault handler
        error = DeviceError(f"{headline}\n  detail: {exc.message}", fix=fix)
        return with_fault(error, fault_kind, headline)

    def close(self) -> None:
        """Stop QEMU and remove its working and counts folders. Safe to call twice; a Ctrl-C / SIGTERM that arrives
        meanwhile is acted on once this is done."""
        with signals_deferred():
            try:
                if self.qemu is not None:
                    self.qemu.close()
            finally:
                if self._counts_dir is not None:
                    shutil.rmtree(self._counts_dir, ignore_errors=True)

    def __enter__(self) -> "QemuSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
