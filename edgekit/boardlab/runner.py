"""``edgekit run ARTIFACT --device labgrid:PLACE``: the MCU runner on a board of a labgrid lab.

The place names its board with tags (``board=<devices/ profile>``, optional ``bootstrap=qemu|pyocd``). The
firmware is resolved (or built) BEFORE the lock is taken; then the place is acquired (``--lock-timeout``), the
firmware is loaded through the place's bootstrap driver, our UART protocol runs over the place's serial
resource through labgrid's SerialDriver, and the place is released on every way out: success, device fault,
timeout, Ctrl-C, SIGTERM. Before every inference the runner checks with the coordinator that the place's
resources are still exported; an exporter that disappears ends the run as a ``disconnected`` fault, and the
inferences measured before it are kept (run.json ``complete: false``).
"""
from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import List, Optional, Sequence

from edgekit.boardlab.config import DriverConfig, EnvironmentConfig
from edgekit.errors import DeviceError, UserError
from edgekit.run.base import RUNNERS, RunRequest, RunResult
from edgekit.run.runners.mcu import BOOT_TIMEOUT_S, McuRunner, refuse_harness_firmware, resolve_firmware

log = logging.getLogger(__name__)

DEFAULT_LOCK_TIMEOUT_S = 60.0
BOOTSTRAPS = ("qemu", "pyocd")


def place_drivers(board, bootstrap: str) -> List[DriverConfig]:
    """The labgrid drivers of a place for a board profile (the ``drivers:`` list of an environment file)."""
    if bootstrap == "qemu":
        if not board.is_qemu:
            raise UserError(f"place tag bootstrap=qemu, but {board.name} is not a QEMU board")
        return [{"EdgekitQemuBootstrapDriver": {"board": board.name}}, {"SerialDriver": {"timeout": 10.0}}]
    if bootstrap == "pyocd":
        if not board.pyocd_target:
            raise UserError(f"profile {board.name} names no connection.pyocd_target for the pyOCD bootstrap",
                            fix="add it to the profile")
        return [{"EdgekitPyOCDDriver": {"target_name": board.pyocd_target}}, {"SerialDriver": {"timeout": 10.0}}]
    raise UserError(f"place tag bootstrap={bootstrap!r} is not one of {', '.join(BOOTSTRAPS)}")


def environment_config(place: str, coordinator: str, board, bootstrap: str) -> EnvironmentConfig:
    """A labgrid environment file (as a dict) for ``place`` with this board profile: usable with labgrid-client
    -c and pytest --lg-env as well."""
    return {"targets": {place: {"resources": [{"RemotePlace": {"name": place}}],
                                "drivers": place_drivers(board, bootstrap)}},
            "options": {"coordinator_address": coordinator}}


# the SIGTERM (or SIGINT) a running lab session received; kept because the handler's KeyboardInterrupt can be swallowed when the
# signal arrives inside a __del__ (labgrid's Step.__del__: "Exception ignored in ..."), so infer() raises it again
_pending_signal: List[int] = []


def raise_pending_signal() -> None:
    """Raise KeyboardInterrupt if a SIGTERM arrived whose interrupt was swallowed (see ``_pending_signal``)."""
    if _pending_signal:
        raise _interrupt(_pending_signal[-1])


def _interrupt(signum: int) -> KeyboardInterrupt:
    """Ctrl-C stays a plain KeyboardInterrupt; SIGTERM/SIGHUP become edgekit.interrupts.Terminated (CLI exit 128+N)."""
    from edgekit.interrupts import Terminated

    return KeyboardInterrupt(f"signal {signum}") if signum == signal.SIGINT else Terminated(signum)


@contextmanager
def _sigterm_as_interrupt():
    """SIGTERM raises KeyboardInterrupt while the place is held, so the lock is released on a plain kill too; SIGINT
    (when Python's default Ctrl-C handler is in place) is recorded the same way, so neither can be lost."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        _pending_signal.append(signum)
        raise _interrupt(signum)

    default_hook = sys.unraisablehook

    def quiet_swallowed_interrupt(unraisable) -> None:
        """Our interrupt, raised inside a __del__ and swallowed there, is re-raised by raise_pending_signal(): Python's
        "Exception ignored in ... Traceback" print of it would only look like a crash. Everything else is printed."""
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and _pending_signal:
            log.debug("interrupt swallowed in %r; raised again before the next step", unraisable.object)
            return
        default_hook(unraisable)

    _pending_signal.clear()
    signals = [signal.SIGTERM] + ([signal.SIGINT] if signal.getsignal(signal.SIGINT) is signal.default_int_handler else [])
    previous = {signum: signal.signal(signum, handler) for signum in signals}
    sys.unraisablehook = quiet_swallowed_interrupt
    try:
        yield
    finally:
        sys.unraisablehook = default_hook
        for signum, before in previous.items():
            signal.signal(signum, before)
        _pending_signal.clear()


class LabgridSession:
    """An acquired place with the firmware loaded: ``info`` (HELLO) and ``infer`` like QemuSession."""

    def __init__(self, place, board, elf: Path, drivers: List[DriverConfig], *, timeout_s: float,
                 boot_timeout_s: float) -> None:
        from edgekit.firmware.protocol import DeviceClient
        from edgekit.boardlab.transport import LabgridSerialTransport

        self.place, self.board, self.timeout_s = place, board, timeout_s
        target = place.target(drivers)
        self.bootstrap = target.get_driver("BootstrapProtocol")
        started = time.monotonic()
        try:
            self.bootstrap.load(str(elf))
        except Exception as exc:  # noqa: BLE001 - flashers fail in their own ways; say which place and why
            raise DeviceError(f"loading {elf.name} through {type(self.bootstrap).__name__} on place {place.name} "
                              f"failed: {exc}") from None
        self.load_s = time.monotonic() - started
        serial = target.get_driver("SerialDriver")
        self.port = f"{serial.port.host}:{serial.port.port}" if hasattr(serial.port, "host") else str(serial.port.port)
        self.transport = LabgridSerialTransport(serial, f"place {place.name} serial ({type(serial.port).__name__} "
                                                        f"{self.port})")
        self.client = DeviceClient(self.transport, timeout_s=timeout_s)
        try:
            self.client.wait_boot(timeout_s=boot_timeout_s)
        except DeviceError:
            log.debug("no BOOT frame on %s (a board already running sends none)", self.transport.description)
        self.info = self.client.hello(timeout_s=boot_timeout_s)
        self._counted = 0

    def _lost(self) -> Optional[DeviceError]:
        from edgekit.run.faults import DISCONNECTED, FIXES, with_fault

        missing = self.place.missing_resources()
        if not missing:
            return None
        headline = (f"place {self.place.name} lost its resources ({', '.join(missing)}): the exporter or the "
                    "coordinator is gone")
        return with_fault(DeviceError(headline, fix=FIXES[DISCONNECTED]), DISCONNECTED, headline)

    def infer(self, inputs: Sequence, timeout_s: Optional[float] = None):
        from edgekit.firmware.qemu import CountedResult
        from edgekit.run.faults import HUNG, fault_of, with_fault

        raise_pending_signal()
        lost = self._lost()
        if lost is not None:
            raise lost
        try:
            result = self.client.infer(inputs, timeout_s)
        except DeviceError as exc:
            lost = self._lost()
            if lost is not None:
                raise lost from None
            if (fault := fault_of(exc)) is not None and fault.kind == HUNG:
                raise with_fault(DeviceError(f"the board of place {self.place.name} sent no reply\n  detail: "
                                             f"{exc.message}", fix=exc.fix), HUNG, exc.message) from None
            raise
        counted = CountedResult(**vars(result))
        counts = self.bootstrap.counts() if hasattr(self.bootstrap, "counts") else None
        if counts is not None:
            if len(counts.inferences) <= self._counted:
                raise DeviceError(f"the instruction-count plugin recorded no inference end for inference "
                                  f"#{self._counted + 1}")
            current = counts.inferences[self._counted]
            self._counted = len(counts.inferences)
            counted.instructions, counted.op_instructions = current.instructions, current.op_instructions
        else:
            counted.instructions = counted.op_instructions = None
        return counted

    def close(self) -> None:
        self.place.release()   # deactivates the drivers (QEMU stops, serial closes), then unlocks

    def __enter__(self) -> "LabgridSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@RUNNERS.register("labgrid")
class LabgridRunner(McuRunner):
    """labgrid:PLACE — a board of a labgrid lab (a real one via pyOCD, or an emulated place via QEMU)."""

    kind = "labgrid"
    options = frozenset({"coordinator", "lock_timeout", "boot_timeout_s"})

    def __init__(self, target) -> None:
        super().__init__(target)
        self._place = None
        self._bootstrap = "qemu"

    def board(self, request: RunRequest):
        from edgekit.firmware.boards import board_from_profile, load_board

        tags = self._place.tags
        if self.target.profile:
            board = board_from_profile(self.target.profile)
        elif tags.get("board"):
            board = load_board(tags["board"])
        else:
            raise UserError(f"place {self._place.name} has no board tag, so edgekit does not know which board it is",
                            fix=f"labgrid-client -p {self._place.name} set-tags board=PROFILE (e.g. mps2-an386), "
                                "or pass --profile PROFILE")
        self._bootstrap = tags.get("bootstrap") or ("qemu" if board.is_qemu else "pyocd")
        return board

    def run(self, request: RunRequest) -> RunResult:
        from edgekit.boardlab.place import LabPlace

        options = request.options
        with _sigterm_as_interrupt(), LabPlace(self.target.address, options.coordinator) as place:
            self._place = place
            board = self.board(request)
            drivers = place_drivers(board, self._bootstrap)
            firmware = resolve_firmware(Path(request.artifact), board.name)   # built before the lock is taken
            try:
                refuse_harness_firmware(firmware, request.artifact)
                waited = time.monotonic()
                place.acquire(float(options.lock_timeout if options.lock_timeout is not None else DEFAULT_LOCK_TIMEOUT_S))
                lab = {"place": place.record().name, "coordinator": place.address, "holder": place.identity,
                       "lock_wait_s": round(time.monotonic() - waited, 3), "bootstrap": self._bootstrap,
                       "environment": environment_config(place.record().name, place.address, board, self._bootstrap)}
                try:
                    result = self._run(board, firmware, request)
                except DeviceError as exc:
                    partial = getattr(exc, "partial", None)
                    if partial is not None:
                        partial.extra["labgrid"] = lab
                    raise
                result.extra["labgrid"] = lab
                return result
            finally:
                firmware.close()

    def open_session(self, board, firmware, request: RunRequest):
        return LabgridSession(self._place, board, firmware.elf, place_drivers(board, self._bootstrap),
                              timeout_s=request.timeout_s,
                              boot_timeout_s=float(request.options.boot_timeout_s or BOOT_TIMEOUT_S))
