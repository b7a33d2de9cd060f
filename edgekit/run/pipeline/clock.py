"""Place a remote device's phase windows on this host's clock, for a power monitor read by the host.

The pipeline runner prints its CLOCK_MONOTONIC (``EKPS <seconds>`` lines, a burst before the timed runs and
one after); the host reads the runner's output as it arrives and stamps each of those lines with its own
time.monotonic(). Every stamp is the device time plus the clock offset plus that line's transport delay,
so the smallest difference in each burst is the best estimate of the offset (its error: the one-way delay
of the fastest line, about half a round trip: well under a millisecond on a LAN or USB).
"""
from __future__ import annotations

import subprocess
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

from edgekit.errors import DeviceError

SYNC_PREFIX = "EKPS "


def stream_lines(argv: Sequence[str], timeout_s: float) -> Tuple[str, str, int, List[Tuple[float, float]]]:
    """Run ``argv`` to completion, reading stdout as it arrives: (stdout, stderr, exit code, stamps) where
    stamps are (host arrival time, device time) of every EKPS line."""
    process = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, bufsize=1)
    errors: List[str] = []
    reader = threading.Thread(target=lambda: errors.append(process.stderr.read()), daemon=True)
    reader.start()
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        process.kill()

    timer = threading.Timer(timeout_s, expire)
    timer.start()
    lines, stamps = [], []
    try:
        for line in process.stdout:
            arrived = time.monotonic()
            if line.startswith(SYNC_PREFIX):
                try:
                    stamps.append((arrived, float(line[len(SYNC_PREFIX):])))
                except ValueError:
                    pass
            lines.append(line)
        code = process.wait()
    finally:
        timer.cancel()
        reader.join(timeout=5)
    if expired.is_set():
        raise DeviceError(f"the pipeline runner did not finish within {timeout_s:g} s")
    return "".join(lines), "".join(errors), code, stamps


def clock_offset(stamps: Sequence[Tuple[float, float]]) -> Optional[Dict[str, float]]:
    """host time = device time + offset_s, from the two bursts of EKPS stamps (their fastest lines)."""
    if not stamps:
        return None
    diffs = [host - device for host, device in stamps]
    half = max(1, len(diffs) // 2)
    first, last = min(diffs[:half]), min(diffs[half:] or diffs[:half])
    return {"offset_s": (first + last) / 2, "drift_s": last - first, "spread_s": max(diffs) - min(diffs),
            "lines": len(diffs)}
