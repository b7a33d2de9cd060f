"""`edgekit qemu FIRMWARE --serial pty`: boot firmware on its emulated board and hand UART0 to another program.

QEMU's UART0 becomes a pseudo-terminal whose path is printed (and written to ``--pty-file`` if given), so a tool
that talks to a serial port, such as the official MLPerf Tiny runner (its devices.yaml ``port:``), can drive the
emulated board exactly as it drives a real one. edgekit itself never reads the pty. The emulator runs until it
exits by itself or Ctrl-C / SIGTERM / SIGHUP (edgekit.interrupts) stops it; QEMU and its working folder are then
removed and the exit code is 0.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Dict

from edgekit.errors import DeviceError, UserError


def register(subparsers) -> Dict[str, Callable]:
    q = subparsers.add_parser("qemu", help="boot firmware in QEMU with UART0 on a pty, for an external runner "
                                           "(e.g. the MLPerf Tiny runner)")
    q.add_argument("firmware", type=Path, help="firmware project folder (edgekit firmware --build) or its .elf")
    q.add_argument("--serial", choices=("pty",), default="pty", help="where UART0 goes: pty (printed path; default)")
    q.add_argument("--board", help="QEMU board (default: the board firmware.json names)")
    q.add_argument("--pty-file", type=Path, help="also write the pty path to this file (for scripts)")
    return {"qemu": cmd_qemu}


def _board_of(args: argparse.Namespace) -> str:
    from edgekit.run.runners.mcu import _project_of, _read_info

    if args.board:
        return args.board
    project = _project_of(args.firmware)
    info = _read_info(project) if project is not None else None
    if info is None:
        raise UserError(f"{args.firmware} has no firmware.json naming its board", fix="add --board BOARD (a QEMU board)")
    return info.board.board


def cmd_qemu(args: argparse.Namespace) -> int:
    from edgekit.atomic import write_atomically
    from edgekit.console import say
    from edgekit.firmware.boards import load_board
    from edgekit.firmware.qemu import QemuProcess
    from edgekit.run.runners.mcu import resolve_firmware

    if not args.firmware.exists():
        raise UserError(f"firmware {args.firmware} does not exist", fix="pass a folder made by `edgekit firmware --build`")
    if args.firmware.is_file() and args.firmware.suffix.lower() != ".elf":
        raise UserError(f"{args.firmware} is not a firmware project folder or an .elf",
                        fix="build it first: edgekit firmware MODEL --board BOARD --build -o DIR")
    board = load_board(_board_of(args))
    if not board.is_qemu:
        raise UserError(f"board {board.name} is real hardware, not a QEMU board",
                        fix="connect the runner to the board's own serial port")
    firmware = resolve_firmware(args.firmware, board.name)
    try:
        with QemuProcess(board, firmware.elf, uart="external", extra_args=["-serial", "pty"]) as qemu:
            pty = qemu._wait_pty(10.0)
            if args.pty_file is not None:  # atomically: a script polling for the file never reads it half-written
                write_atomically(args.pty_file, pty + "\n")
            app = firmware.info.app if firmware.info is not None else None
            what = f"{app['harness']} harness ({app['model_id']})" if app else "firmware"
            say(f"QEMU {board.qemu_machine} runs {what} {firmware.elf} (pid {qemu.process.pid})")
            say(f"UART0: {pty}   (point the runner at it, e.g. devices.yaml `port: {pty}`; any baud rate)")
            say("Ctrl-C or SIGTERM stops the emulator")
            sys.stdout.flush()
            try:
                code = qemu.process.wait()
            except KeyboardInterrupt as exc:
                from edgekit.interrupts import interrupt_signal, signal_name

                say(f"stopping QEMU ({signal_name(interrupt_signal(exc))})")
                return 0
            if code != 0:
                raise DeviceError(f"QEMU ended by itself: {qemu.describe()}")
            say("the firmware ended (QEMU exited 0)")
            return 0
    finally:
        if args.pty_file is not None and args.pty_file.exists():
            args.pty_file.unlink()
        firmware.close()
