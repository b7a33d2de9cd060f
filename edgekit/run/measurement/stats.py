"""Latency statistics: percentiles (linear interpolation between order statistics), mean, std, throughput."""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

PERCENTILE_METHOD = "linear"  # numpy's default: interpolates between the two nearest ranks


def latency_summary(latencies_ms: Sequence[float]) -> Dict[str, Optional[float]]:
    """p50/p90/p99/max/min/mean/std (population std) in ms, and the count; Nones when empty."""
    values = np.asarray(latencies_ms, dtype=np.float64)
    if values.size == 0:
        return {k: None for k in ("p50", "p90", "p99", "max", "min", "mean", "std")} | {"count": 0}
    p50, p90, p99 = np.percentile(values, [50, 90, 99], method=PERCENTILE_METHOD)
    return {
        "p50": float(p50), "p90": float(p90), "p99": float(p99),
        "max": float(values.max()), "min": float(values.min()),
        "mean": float(values.mean()), "std": float(values.std()),
        "count": int(values.size),
    }


def throughput(count: int, wall_s: Optional[float]) -> Optional[float]:
    """Inferences per second over the warm phase's wall time (includes the runner's own per-iteration work)."""
    if not count or not wall_s or wall_s <= 0:
        return None
    return count / wall_s
