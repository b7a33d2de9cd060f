"""Parity thresholds, declared once next to what they protect."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional

from edgekit.errors import UserError


@dataclass(frozen=True)
class Tolerance:
    """Minimum agreement a candidate must reach on every output (None: not checked)."""

    min_cosine: Optional[float] = None
    min_top1: Optional[float] = None
    min_sqnr_db: Optional[float] = None

    def __post_init__(self) -> None:
        """Refuse thresholds no model can meet or that check nothing (cosine > 1, top-1 of 2, NaN)."""
        ranges = (("--min-cosine", self.min_cosine, -1.0, 1.0), ("--min-top1", self.min_top1, 0.0, 1.0),
                  ("--min-sqnr-db", self.min_sqnr_db, -math.inf, math.inf))
        problems = []
        for option, value, low, high in ranges:
            if value is None:
                continue
            if not math.isfinite(value) or not low <= value <= high:
                valid = "a finite number of dB" if math.isinf(low) else f"between {low:g} and {high:g}"
                problems.append(f"{option} {value:g} is out of range: it must be {valid}")
        if problems:
            raise UserError("; ".join(problems), fix="give thresholds in their valid range (cosine and top-1 are at most 1)")

    def failures(self, output: str, metrics: Dict[str, float]) -> List[str]:
        checks = (("cosine", self.min_cosine), ("top1_agreement", self.min_top1), ("sqnr_db", self.min_sqnr_db))
        failed = []
        for key, minimum in checks:
            if minimum is None or key not in metrics:
                continue
            if not metrics[key] >= minimum:
                failed.append(f"{output}: {key} = {metrics[key]:.4f} < {minimum}")
        return failed

    def to_json(self) -> Dict[str, Optional[float]]:
        return asdict(self)


# Default gate for `edgekit quantize`: an INT8 model that agrees less than this with its float
# reference has lost too much to ship without a look (typical INT8 CNNs reach > 0.99).
QUANTIZE_DEFAULT = Tolerance(min_cosine=0.98, min_top1=0.95)
