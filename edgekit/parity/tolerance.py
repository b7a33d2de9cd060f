"""Parity thresholds, declared once next to what they protect."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Tuple

from edgekit.errors import UserError


@dataclass(frozen=True)
class Tolerance:
    """Minimum agreement a candidate must reach on every output (None: not checked)."""

    min_cosine: Optional[float] = None
    min_top1: Optional[float] = None
    min_sqnr_db: Optional[float] = None
    min_topk: Optional[float] = None   # detection scores: share of the reference's top-10 anchors kept
    min_iou: Optional[float] = None    # masks: foreground IoU
    # --output-kind NAME=KIND pairs (edgekit.parity.output_kind): how each named output is judged
    output_kinds: Tuple[Tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        """Refuse thresholds no model can meet or that check nothing (cosine > 1, top-1 of 2, NaN)."""
        ranges = (("--min-cosine", self.min_cosine, -1.0, 1.0), ("--min-top1", self.min_top1, 0.0, 1.0),
                  ("--min-sqnr-db", self.min_sqnr_db, -math.inf, math.inf), ("--min-topk", self.min_topk, 0.0, 1.0),
                  ("--min-iou", self.min_iou, 0.0, 1.0))
        problems = []
        for option, value, low, high in ranges:
            if value is None:
                continue
            if not math.isfinite(value) or not low <= value <= high:
                valid = "a finite number of dB" if math.isinf(low) else f"between {low:g} and {high:g}"
                problems.append(f"{option} {value:g} is out of range: it must be {valid}")
        if problems:
            raise UserError("; ".join(problems), fix="give thresholds in their valid range (cosine and top-1 are at most 1)")

    def failures(self, output: str, metrics: Dict[str, float], kind: Optional[str] = None) -> List[str]:
        """Every threshold ``metrics`` misses. A scalar output (one value per sample) is not judged by cosine:
        over one value per sample it measures the outputs' common sign, not agreement."""
        checks = (("cosine", self.min_cosine), ("top1_agreement", self.min_top1), ("sqnr_db", self.min_sqnr_db),
                  ("topk_agreement", self.min_topk), ("mask_iou", self.min_iou))
        failed = []
        for key, minimum in checks:
            if minimum is None or key not in metrics or (key == "cosine" and kind == "scalar"):
                continue
            if not metrics[key] >= minimum:
                failed.append(f"{output}: {key} = {metrics[key]:.4f} < {minimum}")
        return failed

    def kind_overrides(self) -> Dict[str, str]:
        return dict(self.output_kinds)

    def to_json(self) -> Dict[str, object]:
        body: Dict[str, object] = dict(asdict(self))
        if self.output_kinds:
            body["output_kinds"] = dict(self.output_kinds)
        else:
            del body["output_kinds"]
        return body


# Default gate for `edgekit quantize`: an INT8 model that agrees less than this with its float
# reference has lost too much to ship without a look (typical INT8 CNNs reach > 0.99).
QUANTIZE_DEFAULT = Tolerance(min_cosine=0.98, min_top1=0.95)
