"""Flash real boards with pyocd (always in a subprocess with a timeout: with no probe attached some pyocd
commands wait forever) and find the board's USB virtual COM port.

    probes = list_probes()                      # [] when nothing is attached
    result = flash_firmware(load_board("nucleo-l4r5zi"), elf)
    client = connect_serial(board, result.serial_port)   # edgekit.firmware.transport
"""
from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

from edgekit.errors import DeviceError, DeviceNotFoundError, ToolMissingError, UserError
from edgekit.firmware.boards import Board

log = logging.getLogger(__name__)

PYOCD_INSTALL = "pip install pyocd"


@dataclass(frozen=True)
class Probe:
    unique_id: str
    description: str
    vendor: str = ""
    product: str = ""
    target: str = ""          # the target the probe's firmware reports (boards with on-board probes)


@dataclass(frozen=True)
class FlashResult:
    probe: Probe
    target: str
    elf: Path
    seconds: float
    serial_port: Optional[str]   # the probe's virtual COM port, when found
    log: str


def _pyocd(args: Sequence[str], timeout_s: float, what: str) -> subprocess.CompletedProcess:
    try:
        import pyocd  # noqa: F401  (only to tell a missing install apart from a failing command)
    except ImportError:
        raise ToolMissingError("pyocd", PYOCD_INSTALL) from None
    cmd = [sys.executable, "-m", "pyocd", *args]
    log.debug("running %s", " ".join(cmd))
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        out = ((exc.stdout or b"") if isinstance(exc.stdout, bytes) else (exc.stdout or "").encode()).decode(
            errors="replace")
        raise DeviceError(f"pyocd {what} did not finish within {timeout_s:.0f} s (killed); output so far:\n"
                          f"{out.strip()[-2000:] or '(none)'}",
                          fix="unplug and replug the board, close other debuggers (IDE, openocd), retry") from exc


def list_probes(timeout_s: float = 30.0) -> List[Probe]:
    """Debug probes attached to this machine (``pyocd json --probes``); [] when none."""
    proc = _pyocd(["json", "--probes"], timeout_s, "probe listing")
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise DeviceError(f"pyocd json --probes printed no JSON (exit {proc.returncode}): "
                          f"{(proc.stderr or proc.stdout).strip()[-1000:]}") from None
    probes = []
    for entry in data.get("boards", []):
        probes.append(Probe(
            unique_id=str(entry.get("unique_id", "")), description=str(entry.get("info", "")),
            vendor=str(entry.get("vendor_name", "")), product=str(entry.get("product_name", "")),
            target=str(entry.get("target", "")),
        ))
    return probes


def known_targets(timeout_s: float = 60.0) -> List[str]:
    """Target names pyocd can flash right now (built in or from installed CMSIS packs)."""
    proc = _pyocd(["json", "--targets"], timeout_s, "target listing")
    try:
        return [t["name"] for t in json.loads(proc.stdout).get("targets", [])]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise DeviceError(f"pyocd json --targets printed no target list: {proc.stderr.strip()[-1000:]}") from None


def find_serial_port(probe_uid: str) -> Optional[str]:
    """The USB virtual COM port that belongs to a probe (ST-LINK and J-Link OB share its serial number)."""
    from serial.tools import list_ports

    for port in list_ports.comports():
        if port.serial_number and probe_uid and port.serial_number.lower() == probe_uid.lower():
            return port.device
    return None


def choose_probe(probes: Sequence[Probe], board: Board, unique_id: Optional[str]) -> Probe:
    if not probes:
        raise DeviceNotFoundError(
            f"no debug probe is attached, so {board.name} cannot be flashed",
            fix=f"connect the board's debug USB port ({board.connection.get('usb_vcp', 'on-board probe')}); "
                "on Linux install the probe's udev rules; check with `pyocd list`")
    if unique_id:
        for probe in probes:
            if probe.unique_id == unique_id:
                return probe
        raise DeviceNotFoundError(f"no attached probe has unique id {unique_id!r}; attached: "
                                  + ", ".join(f"{p.unique_id} ({p.description})" for p in probes))
    if len(probes) > 1:
        raise DeviceNotFoundError(f"{len(probes)} probes are attached; choose one: "
                                  + ", ".join(f"{p.unique_id} ({p.description})" for p in probes),
                                  fix="pass the probe's unique id")
    return probes[0]


def flash_firmware(board: Board, elf: Path, *, probe_uid: Optional[str] = None, timeout_s: float = 180.0,
                   check_target: bool = True) -> FlashResult:
    """Program ``elf`` into the board through pyocd, reset it, and find its serial port."""
    if board.is_qemu:
        raise UserError(f"{board.name} is an emulated board; it is run with QEMU, not flashed")
    target = board.pyocd_target
    if not target:
        raise UserError(f"profile {board.name} names no connection.pyocd_target", fix="add it to the profile")
    elf = Path(elf)
    if not elf.is_file():
        raise UserError(f"firmware {elf} does not exist", fix="build the firmware first")
    probe = choose_probe(list_probes(), board, probe_uid)
    if check_target and target not in known_targets():
        pack = board.connection.get("pyocd_pack", "")
        raise ToolMissingError(f"pyocd support for target {target}",
                               f"pyocd pack install {target}  (downloads the CMSIS pack {pack}; needs internet once)")
    start = time.monotonic()
    proc = _pyocd(["flash", "--target", target, "--uid", probe.unique_id, "--format", "elf", str(elf)],
                  timeout_s, f"flash of {elf.name}")
    if proc.returncode != 0:
        raise DeviceError(f"pyocd could not flash {board.name} (exit {proc.returncode}):\n"
                          f"{(proc.stderr or proc.stdout).strip()[-3000:]}",
                          fix="check the target name in the profile, the USB cable, and that no other debugger "
                              "holds the probe")
    seconds = time.monotonic() - start
    return FlashResult(probe, target, elf, seconds, find_serial_port(probe.unique_id),
                       (proc.stdout + proc.stderr).strip())


flash = flash_firmware  # short name used by edgekit.run.runners.mcu
