"""The inference count N of the MLPerf Tiny runner's performance windows (`infer N W`), and tests_performance.yaml.

The reference runner (mlcommons/tiny benchmark/runner) reads N from its test file; its stock
benchmark/runner/tests_performance.yaml has `loop 5: [download, infer N W]` per model id (ad01 1500 10, ic01 20 5,
kws01 70 10, vww01 20 5). script.py flags a loop over in less than 10 s ("ERROR 2 - loop exited before 10 seconds
elapsed") and the runner's watchdog aborts windows above ~30 s, so N must make one window N x per-inference time
land in 10..30 s on the chosen board. edgekit aims at the middle, 20 s.

The per-inference time is an ESTIMATE: the firmware's multiply-accumulates x instructions per MAC x the board
profile's cycle_model.cycles_per_instruction, at the harness clock (firmware_clock_hz); or, when given, the
per-class cycle estimate of a counted run (run.json work.cycles_estimated / deploy.json estimates.cycles).
Instructions per MAC from edgekit's exact QEMU counts (README, firmware benchmark): on the Cortex-M4 (mps2-an386)
KWS 3.07 M / 2.66 M MACs = 1.16, IC 11.88 M / 12.50 M = 0.95, AD 0.265 M / 0.264 M = 1.00, VWW-style
8.86 M / 7.49 M = 1.18: median 1.08, taken as 1.1; on the Cortex-M55 (mps3-an547, Helium) only KWS is measured:
1.26 M / 2.66 M = 0.47.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple

from edgekit.errors import UserError

TARGET_WINDOW_S = 20.0
RUNNER_MIN_WINDOW_S = 10.0     # script.py: "error 2"
RUNNER_MAX_WINDOW_S = 30.0     # the runner aborts longer windows (issue 27)
INSTRUCTIONS_PER_MAC = 1.1
INSTRUCTIONS_PER_MAC_BY_CPU = {"cortex-m55": 0.47}
DEFAULT_CPI = 1.4
# benchmark/runner/tests_performance.yaml (mlcommons/tiny): model id -> (name, N, warmups)
STOCK: Dict[str, Tuple[str, int, int]] = {
    "ad01": ("anomoly_detection", 1500, 10),     # sic, the runner's spelling
    "ic01": ("image_classification", 20, 5),
    "kws01": ("keyword_spotting", 70, 10),
    "vww01": ("person_detection", 20, 5),
}


@dataclass(frozen=True)
class PerformanceN:
    model_id: str
    iterations: int
    warmups: int
    per_inference_s: float
    window_s: float
    method: str          # how per_inference_s was estimated

    @property
    def in_range(self) -> bool:
        return RUNNER_MIN_WINDOW_S <= self.window_s <= RUNNER_MAX_WINDOW_S


def iterations_for(per_inference_s: float) -> int:
    """N that puts N x per_inference_s nearest TARGET_WINDOW_S, at least 1."""
    if not per_inference_s > 0:
        raise UserError("the per-inference time estimate must be positive")
    return max(1, int(round(TARGET_WINDOW_S / per_inference_s)))


def cycles_from_file(path: Path) -> float:
    """Estimated cycles per inference from a run.json (work.cycles_estimated) or deploy.json (estimates.cycles)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from exc
    for keys in (("work", "cycles_estimated", "cycles"), ("estimates", "cycles", "cycles")):
        node = data
        for k in keys:
            node = node.get(k) if isinstance(node, dict) else None
        if isinstance(node, (int, float)) and node > 0:
            return float(node)
    raise UserError(f"{path} holds no cycle estimate (work.cycles_estimated or estimates.cycles)",
                    fix="pass the run.json of `edgekit run --count-instructions` or a deploy.json")


def performance_n(model_id: str, board, macs: int, *, cycles: Optional[float] = None,
                  cycles_source: str = "") -> PerformanceN:
    """N for ``model_id`` on ``board`` (a loaded Board) from the estimated per-inference time at its harness clock."""
    name, _stock_n, warmups = STOCK[model_id]
    clock = int(board.firmware_clock_hz)
    if cycles is None:
        cpi = float((board.profile.get("cycle_model") or {}).get("cycles_per_instruction") or DEFAULT_CPI)
        per_mac = INSTRUCTIONS_PER_MAC_BY_CPU.get(str(board.profile.get("cpu")), INSTRUCTIONS_PER_MAC)
        cycles = macs * per_mac * cpi
        method = (f"estimated: {macs:,} MACs x {per_mac} instructions/MAC (edgekit's exact counts on the MLPerf "
                  f"Tiny models) x {cpi:g} cycles/instruction (profile) at {clock / 1e6:g} MHz")
    else:
        method = f"estimated: {cycles:,.0f} cycles per inference ({cycles_source}) at {clock / 1e6:g} MHz"
    if board.is_qemu:
        method += ("; under QEMU the harness timer counts emulated time, which follows the host's speed, so the "
                   "real window can differ (edgekit run --harness sizes N itself)")
    per = cycles / clock
    n = iterations_for(per)
    return PerformanceN(model_id, n, warmups, per, n * per, method)


def performance_yaml(perf: PerformanceN) -> str:
    """tests_performance.yaml in the stock file's form, the chosen model's N replaced (the others stock)."""
    out = []
    for model_id, (name, n, warmups) in STOCK.items():
        if model_id == perf.model_id:
            n, warmups = perf.iterations, perf.warmups
        out += [f"{model_id}:", f"  name: {name}", f"  model: {model_id}", "  truth_file: y_labels.csv",
                "  script:", "    - loop 5:", "      - download", f"      - infer {n} {warmups}"]
    out += ["sww01:", "  name: streaming_wakeword", "  model: sww01", "  truth_file: sww_long_test.json",
            "  script:", "    - stream"]
    return "\n".join(out) + "\n"


def describe(perf: PerformanceN) -> str:
    window = f"{perf.window_s:.1f} s window"
    if not perf.in_range:
        window += (f" - OUTSIDE the runner's {RUNNER_MIN_WINDOW_S:g}-{RUNNER_MAX_WINDOW_S:g} s (one inference takes "
                   f"{perf.per_inference_s:.1f} s)")
    return (f"performance N for {perf.model_id}: infer {perf.iterations} {perf.warmups} "
            f"({perf.per_inference_s * 1e3:.3g} ms per inference, {window}; {perf.method})")
