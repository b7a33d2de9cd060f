"""Running artifacts on devices: one Runner interface for host, SSH, ADB, QEMU and serial boards.

Here: the contract and the hand-offs every run shares (``base``: ``Runner``, ``RUNNERS``; ``results``:
``RunOptions``, ``RunResult``, ``RunReport``; ``report``: run.json / report.md; ``resolve``: --device -> target;
``inputs``, ``faults``, ``sparse``; ``cli``: `edgekit run` / `edgekit devices`; ``devices``).
Subpackages, one role each:

- ``runners``: the device runners registered in ``RUNNERS`` (host/macos, ssh, adb, qemu/serial) and the two scripts
  copied as-is to devices (``remote_runner.py``, ``pipeline_runner.py``; standard library + numpy only).
- ``measurement``: energy (``POWER_MONITORS``, monitor drivers, estimates), thermal analysis, latency statistics.
- ``pipeline``: `edgekit run --pipeline` (host-side budget, generated C preprocessing, MCU pipeline, clock sync).
- ``mlperf``: MLPerf Tiny dataset folders and the `--harness mlperf-tiny` host side.
"""
