"""What happened to a device that stopped answering: died (signal or exit code), hung (no reply in time), or
disconnected. A ``DeviceError`` carries it as ``fault`` (a ``Fault``: kind, detail); run.json records it next to
``complete: false`` and every inference measured before it."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Optional

from edgekit.errors import DeviceError, EdgekitError
from edgekit.run.results import Fault

DIED, HUNG, DISCONNECTED, DEVICE = "died", "hung", "disconnected", "device-error"


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def exit_text(code: int) -> str:
    """'died with signal 9 (SIGKILL)' for a negative Popen return code, else 'exited with code N'."""
    if code < 0:
        return f"died with signal {-code} ({signal_name(-code)})"
    return f"exited with code {code}"


def stopped(pid: int) -> bool:
    """True when the process is stopped (SIGSTOP/SIGTSTP, or traced) rather than running or sleeping."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] in ("T", "t")


def with_fault(error: DeviceError, kind: str, detail: str) -> DeviceError:
    """Attach a ``Fault`` (kind: died | hung | disconnected | device-error, detail) to a DeviceError."""
    error.fault = Fault(kind=kind, detail=detail)  # type: ignore[attr-defined]
    return error


def fault_of(error: BaseException) -> Optional[Fault]:
    fault = getattr(error, "fault", None)
    return fault if isinstance(fault, Fault) else None


def fault_record(error: EdgekitError, inferences_completed: int) -> Fault:
    """What run.json records about the fault that stopped a run (a device-error unless the error says more)."""
    attached = fault_of(error)
    return Fault(kind=attached.kind if attached else DEVICE,
                 detail=attached.detail if attached else error.message.splitlines()[0],
                 inferences_completed=inferences_completed)


def process_fault(pid: int, code: Optional[int], what: str, timeout_s: float) -> Optional[tuple]:
    """(kind, headline) for a local process behind a device (QEMU, ssh, adb, a runner) after an exchange failed:
    it died (signal or exit code), is stopped, or None when it still runs normally."""
    if code is not None:
        return DIED, f"{what} (pid {pid}) {exit_text(code)}"
    if stopped(pid):
        return HUNG, f"{what} (pid {pid}) is stopped (SIGSTOP): no reply within {timeout_s:g} s"
    return None


FIXES = {
    DIED: "the device process was killed or crashed; the inferences measured before it are kept (complete: false); "
          "run again once the cause is gone",
    HUNG: "the device stopped answering; the inferences measured before it are kept (complete: false); check that it "
          "is not halted, or raise --timeout if one inference really takes this long",
    DISCONNECTED: "check the cable, power and network of the device; the inferences measured before it are kept "
                  "(complete: false)",
}
