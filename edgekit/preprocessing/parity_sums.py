"""preprocess-parity's totals as mergeable sums: images are summarised where they run (one process or a
Ray actor per chunk), summaries merge in any order, and the per-image list is bounded (every image that
failed or mismatched in shape, up to MAX_KEPT, and the TOP_K worst compared images).

Counts (status counts, identical images, elements over 1 LSB) are exact; sums are float64 in the order
the images arrive, so the totals agree with one pass over all images within float64 rounding.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from edgekit.preprocessing.parity_result import Aggregate

MAX_KEPT = 100  # images with a problem named in the report (all are counted)
TOP_K = 20      # worst compared images kept with their metrics


@dataclass
class PixelSums:
    """Differences between reference and candidate tensors, summed over images."""

    images: int = 0
    status_counts: Dict[str, int] = field(default_factory=dict)
    compared: int = 0
    elements: int = 0
    sq: float = 0.0
    absum: float = 0.0
    max_abs: float = 0.0
    lsb_max: float = 0.0
    lsb_sum: float = 0.0
    over: int = 0
    have_lsb: bool = True
    identical: int = 0
    ref_min: float = math.inf   # reference value range (PSNR peak when no spec is known)
    ref_max: float = -math.inf
    problems: List = field(default_factory=list)  # ImageDiff not compared, sorted by name, at most MAX_KEPT
    worst: List = field(default_factory=list)     # (key, name, ImageDiff) of the TOP_K worst compared images

    def add(self, diff, ref: Optional[np.ndarray], cand: Optional[np.ndarray], units, worst_key: str = "") -> None:
        """One image's ImageDiff (and its tensors when it was compared)."""
        self.images += 1
        self.status_counts[diff.status] = self.status_counts.get(diff.status, 0) + 1
        if diff.status != "compared":
            self.problems = sorted(self.problems + [diff], key=lambda d: d.name)[:MAX_KEPT]
            return
        self.compared += 1
        r = np.asarray(ref).astype(np.float64)
        d = np.asarray(cand).astype(np.float64) - r
        self.elements += d.size
        self.sq += float(np.sum(d ** 2))
        self.absum += float(np.sum(np.abs(d)))
        if d.size:
            self.max_abs = max(self.max_abs, float(np.max(np.abs(d))))
            self.ref_min = min(self.ref_min, float(r.min()))
            self.ref_max = max(self.ref_max, float(r.max()))
        lsb = units.lsb(d)
        if lsb is None:
            self.have_lsb = False
        elif lsb.size:
            self.lsb_max = max(self.lsb_max, float(lsb.max()))
            self.lsb_sum += float(lsb.sum())
            self.over += int(np.sum(lsb > 1.0 + 1e-3))
        self.identical += int(bool(diff.metrics.get("identical")))
        if worst_key:
            self._keep((-diff.metrics.get(worst_key, 0.0), diff.name, diff))

    def _keep(self, item) -> None:
        self.worst = sorted(self.worst + [item], key=lambda i: (i[0], i[1]))[:TOP_K]

    def merge(self, other: "PixelSums") -> "PixelSums":
        self.images += other.images
        for k, v in other.status_counts.items():
            self.status_counts[k] = self.status_counts.get(k, 0) + v
        for name in ("compared", "elements", "sq", "absum", "lsb_sum", "over", "identical"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.max_abs = max(self.max_abs, other.max_abs)
        self.lsb_max = max(self.lsb_max, other.lsb_max)
        self.ref_min, self.ref_max = min(self.ref_min, other.ref_min), max(self.ref_max, other.ref_max)
        self.have_lsb = self.have_lsb and other.have_lsb
        self.problems = sorted(self.problems + other.problems, key=lambda d: d.name)[:MAX_KEPT]
        for item in other.worst:
            self._keep(item)
        return self

    def aggregate(self, units) -> "Aggregate":
        """The totals ``edgekit.preprocessing.parity.aggregate`` reports."""
        from edgekit.preprocessing.parity import psnr_db

        out: Aggregate = {"images": self.images, "compared": self.compared, "status_counts": dict(self.status_counts)}
        if not self.compared:
            return out
        total = self.elements
        mse = self.sq / max(total, 1)
        out.update({
            "elements": int(total), "max_abs": self.max_abs, "mean_abs": self.absum / max(total, 1),
            "rmse": math.sqrt(mse), "psnr_db": psnr_db(mse, units.peak), "identical_images": self.identical,
        })
        if units.peak != units.peak:  # no spec: PSNR against the reference's own range
            out["psnr_db"] = psnr_db(mse, self.ref_max - self.ref_min)
            out["psnr_peak"] = "reference value range"
        if self.have_lsb:
            out.update({"max_abs_lsb": self.lsb_max, "mean_abs_lsb": self.lsb_sum / max(total, 1),
                        "over_1_lsb": self.over / max(total, 1)})
        return out

    def kept_images(self) -> List:
        """The bounded per-image list, by name."""
        return sorted(self.problems + [d for _, _, d in self.worst], key=lambda d: d.name)
