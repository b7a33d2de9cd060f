"""What happened to a device that stopped answering: died (signal or exit code), hung (no reply in time), or
disconnected. A ``DeviceError`` carries it as ``fault`` ({"kind", "detail"}); run.json records it next to
``complete: false`` and every inference measured before it."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Any, Dict, Optional

from edgekit.errors import DeviceError

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
    """Attach {"kind", "detail"} to a DeviceError (kind: died | hung | disconnected | device-error)."""
    error.fault = {"kind": kind, "detail": detail}  # type: ignore[attr-defined]
    return error


def fault_of(error: BaseException) -> Optional[Dict[str, Any]]:
    fault = getattr(error, "fault", None)
    return dict(fault) if isinstance(fault, dict) else None


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
