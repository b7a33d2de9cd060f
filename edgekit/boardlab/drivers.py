"""Two labgrid bootstrap drivers, registered through labgrid's driver factory (``target_factory.reg_driver``),
so an environment file can name them like labgrid's own:

- ``EdgekitPyOCDDriver``: flashes a real board through pyOCD (labgrid ships OpenOCD, not pyOCD). It binds to
  the place's ``USBDebugger`` / ``NetworkUSBDebugger`` and runs ``pyocd load`` on the host the probe is
  attached to (through labgrid's command wrapper: ssh to the exporter for a network resource).
- ``EdgekitQemuBootstrapDriver``: STANDS IN FOR A FLASHER on an emulated place. Its ``load(elf)`` (re)starts
  qemu-system-arm with the firmware ELF, with the board's UART0 listening on the host/port of the place's
  ``NetworkSerialPort`` (raw TCP), and the ekcount plugin counting instructions per inference. The rest of the
  lab path (coordinator, exporter, place lock, serial resource, our protocol) is the same as for a real board.
"""
from __future__ import annotations

import logging
import re
import shlex
import sys
import time
from pathlib import Path
from typing import List, Optional

import attr
from labgrid.driver.common import Driver
from labgrid.factory import target_factory
from labgrid.protocol import BootstrapProtocol
from labgrid.step import step
from labgrid.util.helper import processwrapper
from labgrid.util.managedfile import ManagedFile

log = logging.getLogger(__name__)

QEMU_WAITING = re.compile(r"QEMU waiting for connection on")


def pyocd_load_command(target: str, elf: str, probe_uid: Optional[str], python: str = "") -> List[str]:
    """The pyOCD command that programs ``elf`` and resets the board (``pyocd load`` = ``pyocd flash``)."""
    cmd = [python or sys.executable, "-m", "pyocd", "load", "--target", target, "--format", "elf"]
    if probe_uid:
        cmd += ["--uid", probe_uid]
    return cmd + [elf]


@target_factory.reg_driver
@attr.s(eq=False)
class EdgekitPyOCDDriver(Driver, BootstrapProtocol):
    """pyOCD bootstrap for a board whose debug probe is a (Network)USBDebugger resource of the place."""

    bindings = {"interface": {"USBDebugger", "NetworkUSBDebugger"}}
    target_name = attr.ib(validator=attr.validators.instance_of(str))   # pyOCD target, e.g. stm32l4r5zitx
    probe_uid = attr.ib(default="", validator=attr.validators.instance_of(str))  # several probes on one host
    python = attr.ib(default="", validator=attr.validators.instance_of(str))  # python with pyocd on the probe host

    @property
    def remote(self) -> bool:
        """The probe hangs off an exporter host (NetworkUSBDebugger): pyocd runs there over labgrid's ssh."""
        return type(self.interface).__name__.startswith("Network")

    def command(self, elf_path: str) -> List[str]:
        """The pyocd command for the host the probe is attached to (before labgrid's ssh wrapping)."""
        uid = self.probe_uid or getattr(self.interface, "serial", None) or None
        return pyocd_load_command(self.target_name, elf_path, uid, self.python or ("python3" if self.remote else ""))

    @Driver.check_active
    @step(args=["filename"])
    def load(self, filename=None):
        managed = ManagedFile(filename, self.interface)   # copies the ELF to the exporter host when remote
        managed.sync_to_resource()
        cmd = self.interface.wrap_command(self.command(managed.get_remote_path())) if self.remote else \
            self.command(managed.get_remote_path())
        log.info("flashing %s with %s", filename, shlex.join(cmd))
        processwrapper.check_output(cmd, print_on_silent_log=True)


@target_factory.reg_driver
@attr.s(eq=False)
class EdgekitQemuBootstrapDriver(Driver, BootstrapProtocol):
    """Emulated place: ``load(elf)`` (re)starts QEMU with UART0 on the NetworkSerialPort's TCP port.
    This driver stands in for a flasher; see the module docstring."""

    bindings = {"port": {"NetworkSerialPort"}}
    board = attr.ib(validator=attr.validators.instance_of(str))          # a QEMU board profile, e.g. mps2-an386
    count_instructions = attr.ib(default=True, validator=attr.validators.instance_of(bool))
    start_timeout = attr.ib(default=20.0, validator=attr.validators.instance_of(float))

    def __attrs_post_init__(self):
        super().__attrs_post_init__()
        self.qemu = None
        self.counts_path: Optional[Path] = None
        self._counts_dir: Optional[Path] = None

    @Driver.check_active
    @step(args=["filename"])
    def load(self, filename=None):
        from edgekit.firmware.boards import load_board

        self.stop()
        board = load_board(self.board)
        if self.port.protocol != "raw":
            raise ValueError(f"the emulated place's NetworkSerialPort must use protocol: raw (QEMU's TCP chardev), "
                             f"not {self.port.protocol}")
        self.qemu = _start_qemu(self, board, Path(filename))

    def counts(self):
        """The instruction-count plugin's records so far (None when not counting)."""
        from edgekit.firmware.plugin import parse_counts

        return parse_counts(self.counts_path) if self.counts_path is not None else None

    def alive(self) -> bool:
        return self.qemu is not None and self.qemu.alive()

    def describe(self) -> str:
        return self.qemu.describe() if self.qemu is not None else "QEMU is not running"

    def stop(self) -> None:
        """Kill QEMU (the emulated board loses power) and drop its counts."""
        import shutil

        if self.qemu is not None:
            self.qemu.close()
            self.qemu = None
        if self._counts_dir is not None:
            shutil.rmtree(self._counts_dir, ignore_errors=True)
            self._counts_dir = self.counts_path = None

    def on_deactivate(self):
        self.stop()


def _start_qemu(driver: EdgekitQemuBootstrapDriver, board, elf: Path):
    """qemu-system-arm with UART0 as a TCP server on the place's serial port; returns when it waits for the
    serial connection (so the BOOT frame reaches whoever connects first)."""
    import tempfile

    from edgekit.firmware.plugin import build_plugin, marker_addresses, plugin_argument
    from edgekit.firmware.qemu import QemuProcess

    plugin = None
    if driver.count_instructions:
        addresses = marker_addresses(elf)
        driver._counts_dir = Path(tempfile.mkdtemp(prefix="eklab-", dir="/tmp"))
        driver.counts_path = driver._counts_dir / "counts.txt"
        plugin = plugin_argument(build_plugin(), driver.counts_path, addresses, "tb")
    chardev = f"socket,id=uart0,host={driver.port.host},port={driver.port.port},server=on,wait=on,nodelay=on"
    qemu = QemuProcess(board, elf, uart="external", plugin=plugin, extra_args=("-chardev", chardev, "-serial", "chardev:uart0"))
    deadline = time.monotonic() + driver.start_timeout
    while not QEMU_WAITING.search(qemu.log_text()):
        if not qemu.alive() or time.monotonic() > deadline:
            detail = qemu.describe()
            qemu.close()
            raise RuntimeError(f"QEMU did not start listening on {driver.port.host}:{driver.port.port}: {detail}")
        time.sleep(0.02)
    return qemu
