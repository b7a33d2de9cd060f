"""Boot time of every QEMU board and the cost of exact instruction counting (the ekcount plugin).

Runs the self-test firmware (firmware/app/selftest.c); one inference executes a loop of a known number of
instructions. Prints, per board, the time from starting QEMU to the INFO reply, and on mps2-an386 the
wall time of one inference without the plugin, with per-block counting (mode=tb, the default) and with
per-instruction counting (mode=insn).

    python tests/benchmarks/bench_qemu_boards.py [--loops 20000000]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _figures import FigureLog, bench_options  # noqa: E402
from edgekit.firmware import boards as B  # noqa: E402
from edgekit.firmware.qemu import QemuSession, qemu_version  # noqa: E402


def loop_input(loops: int) -> np.ndarray:
    x = np.zeros((1, 16), np.int8)
    x[0, :4] = np.frombuffer(np.uint32(loops).tobytes(), dtype=np.int8)
    x[0, 4] = 1
    return x


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loops", type=int, default=20_000_000, help="loop iterations (2 instructions each)")
    parser.add_argument("--repeat", type=int, default=3)
    bench_options(parser)
    args = parser.parse_args()
    if args.smoke:
        args.loops, args.repeat = 200_000, 1
    log = FigureLog("bench_qemu_boards", smoke=args.smoke)
    log.note(f"{qemu_version()}; {B.toolchain_version()}")
    print(f"{qemu_version()}; {B.toolchain_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        print("\nboot: QEMU start -> BOOT frame -> INFO reply (median of", args.repeat, "runs)")
        for name in B.qemu_board_names():
            elf = B.build_selftest(B.load_board(name), Path(tmp) / name)
            boots = []
            for _ in range(args.repeat):
                with QemuSession(B.load_board(name), elf) as qemu:
                    boots.append(qemu.boot_s)
            print(f"  {name:12s} {statistics.median(boots) * 1000:7.1f} ms")
            log.add(f"{name}: boot to INFO reply", round(statistics.median(boots) * 1000, 1), "ms",
                    source=f"QEMU {name}, self-test firmware, median of {args.repeat} wall-time runs on this host")

        board = B.load_board("mps2-an386")
        elf = B.build_selftest(board, Path(tmp) / "an386")
        x = loop_input(args.loops)
        print(f"\none inference = {2 * args.loops + 2:,} counted instructions in the loop (mps2-an386)")
        base = None
        for label, kwargs in (("no plugin", {}), ("plugin mode=tb", {"count_instructions": True}),
                              ("plugin mode=insn", {"count_instructions": True, "plugin_mode": "insn"})):
            times, counted = [], None
            with QemuSession(board, elf, timeout_s=600, **kwargs) as qemu:
                for _ in range(args.repeat):
                    start = time.monotonic()
                    result = qemu.infer([x])
                    times.append(time.monotonic() - start)
                    counted = result.op_instructions
            t = statistics.median(times)
            base = base or t
            mips = (2 * args.loops) / t / 1e6
            print(f"  {label:17s} {t * 1000:8.1f} ms  {mips:7.0f} M instr/s  x{t / base:.2f}"
                  + (f"  counted {counted[0]:,}" if counted else ""))
            src = f"mps2-an386 self-test loop of {2 * args.loops:,} instructions, median of {args.repeat} runs, wall time"
            log.add(f"one inference, {label}", round(t * 1000, 1), "ms", source=src)
            log.add(f"emulation speed, {label}", round(mips), "M instr/s", source=src)
            if counted:
                log.add(f"instructions counted, {label}", counted[0], "instr", method="count", source="ekcount plugin")
    log.write(args.figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
