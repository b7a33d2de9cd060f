"""Parity from per-batch sufficient statistics: batches are summarised where they run, summaries merge
in any order, so the result does not depend on how the data was split or how many workers ran it.

Sums are float64 over the same float64 differences ``edgekit.parity.metrics.output_metrics`` computes,
so the float metrics equal the whole-array path within float64 rounding (well under 1e-9 relative);
counts (top-1 agreement, bit-exact elements, accuracy, corrupt samples) are exact integers.
Per-sample results are a bounded top-K (lowest per-sample SQNR, and top-1 flips), never the dataset.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from edgekit.parity.output_kind import KindChoice, OutputKind, mask_overlap, topk_hits

TOP_K = 20
MAX_CORRUPT_NAMES = 100


@dataclass
class OutputSums:
    """Sufficient statistics of one output over some samples."""

    elements: int = 0
    sum_sq_diff: float = 0.0
    sum_abs_diff: float = 0.0
    sum_ref_sq: float = 0.0
    sum_cand_sq: float = 0.0
    sum_dot: float = 0.0
    max_abs: float = 0.0
    top1_equal: int = 0
    top1_samples: int = 0
    bit_equal: int = 0
    bit_elements: int = 0
    integer: Optional[bool] = None  # both raw outputs integer (bit-exactness is defined)
    topk_hits: int = 0
    topk_total: int = 0
    mask_inter: int = 0
    mask_union: int = 0
    kind: Optional[str] = None        # the output kind the samples were judged as (edgekit.parity.output_kind)
    kind_reason: Optional[str] = None

    def add(self, ref: np.ndarray, cand: np.ndarray, ref_raw: np.ndarray, cand_raw: np.ndarray,
            classification: Union[bool, KindChoice]) -> None:
        """One sample (batch of 1) of this output; ``classification`` is its KindChoice (or, from callers that only
        know classification, a bool)."""
        kind = classification.kind if isinstance(classification, KindChoice) else (
            OutputKind.CLASS_SCORES if classification else None)
        if isinstance(classification, KindChoice) and self.kind is None:
            self.kind, self.kind_reason = classification.kind.value, classification.reason
        classification = kind is OutputKind.CLASS_SCORES
        if kind is OutputKind.DETECTION_SCORES:
            hits, total = topk_hits(np.asarray(ref)[None], np.asarray(cand)[None])
            self.topk_hits += hits
            self.topk_total += total
        elif kind is OutputKind.MASK:
            inter, union = mask_overlap(np.asarray(ref)[None], np.asarray(cand)[None])
            self.mask_inter += inter
            self.mask_union += union
        r = np.asarray(ref, np.float64).ravel()
        c = np.asarray(cand, np.float64).ravel()
        d = r - c
        self.elements += d.size
        self.sum_sq_diff += float(np.dot(d, d))
        self.sum_abs_diff += float(np.sum(np.abs(d)))
        self.sum_ref_sq += float(np.dot(r, r))
        self.sum_cand_sq += float(np.dot(c, c))
        self.sum_dot += float(np.dot(r, c))
        if d.size:
            self.max_abs = max(self.max_abs, float(np.max(np.abs(d))))
        if classification:
            self.top1_samples += 1
            self.top1_equal += int(r.argmax() == c.argmax())
        integer = (np.issubdtype(ref_raw.dtype, np.integer) and np.issubdtype(cand_raw.dtype, np.integer)
                   and ref_raw.shape == cand_raw.shape)
        self.integer = integer if self.integer is None else (self.integer and integer)
        if integer:
            self.bit_elements += ref_raw.size
            self.bit_equal += int(np.sum(ref_raw == cand_raw))

    def merge(self, other: "OutputSums") -> None:
        for name in ("elements", "sum_sq_diff", "sum_abs_diff", "sum_ref_sq", "sum_cand_sq", "sum_dot",
                     "top1_equal", "top1_samples", "bit_equal", "bit_elements", "topk_hits", "topk_total",
                     "mask_inter", "mask_union"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        if self.kind is None:
            self.kind, self.kind_reason = other.kind, other.kind_reason
        self.max_abs = max(self.max_abs, other.max_abs)
        if other.integer is not None:
            self.integer = other.integer if self.integer is None else (self.integer and other.integer)

    def metrics(self, classification: bool) -> Dict[str, float]:
        """The keys and definitions of ``output_metrics``."""
        ref_norm, cand_norm = math.sqrt(self.sum_ref_sq), math.sqrt(self.sum_cand_sq)
        if ref_norm == 0.0 and cand_norm == 0.0:
            cos = 1.0
        elif ref_norm == 0.0 or cand_norm == 0.0:
            cos = 0.0
        else:
            cos = self.sum_dot / (ref_norm * cand_norm)
        if self.sum_sq_diff == 0.0:
            sqnr = math.inf
        elif self.sum_ref_sq == 0.0:
            sqnr = -math.inf
        else:
            sqnr = 10.0 * math.log10(self.sum_ref_sq / self.sum_sq_diff)
        n = max(self.elements, 1)
        diff_norm = math.sqrt(self.sum_sq_diff)
        out: Dict[str, float] = {
            "cosine": float(cos), "sqnr_db": sqnr, "rmse": math.sqrt(self.sum_sq_diff / n), "mae": self.sum_abs_diff / n,
            "rel_l2": diff_norm / ref_norm if ref_norm else diff_norm, "max_abs": self.max_abs,
        }
        if classification and self.top1_samples:
            out["top1_agreement"] = self.top1_equal / self.top1_samples
        if self.kind == OutputKind.DETECTION_SCORES.value:
            out["topk_agreement"] = self.topk_hits / self.topk_total if self.topk_total else 1.0
        if self.kind == OutputKind.MASK.value:
            out["mask_iou"] = self.mask_inter / self.mask_union if self.mask_union else 1.0
        if self.integer:
            out["bit_exact_fraction"] = self.bit_equal / self.bit_elements if self.bit_elements else 1.0
            out["differing_elements"] = int(self.bit_elements - self.bit_equal)
        return out


@dataclass
class ParitySums:
    """Everything a parity run needs from some samples: per-output sums, accuracy counts, corrupt samples, top-K."""

    outputs: List[OutputSums]
    samples: int = 0
    labelled: int = 0
    reference_correct: int = 0
    candidate_correct: int = 0
    corrupt: int = 0
    corrupt_names: List[str] = field(default_factory=list)
    worst: List[Tuple[float, str, dict]] = field(default_factory=list)   # lowest per-sample SQNR (output 0)
    flips: List[Tuple[float, str, dict]] = field(default_factory=list)   # top-1 disagreements, worst first
    top_k: int = TOP_K

    @classmethod
    def empty(cls, n_outputs: int, top_k: int = TOP_K) -> "ParitySums":
        return cls([OutputSums() for _ in range(n_outputs)], top_k=top_k)

    def add_sample(self, name: str, ref: Sequence[np.ndarray], cand: Sequence[np.ndarray], ref_raw: Sequence[np.ndarray],
                   cand_raw: Sequence[np.ndarray], classification: Sequence[Union[bool, KindChoice]],
                   label: Optional[int] = None) -> None:
        self.samples += 1
        for k, sums in enumerate(self.outputs):
            sums.add(ref[k], cand[k], ref_raw[k], cand_raw[k], classification[k])
        r0 = np.asarray(ref[0], np.float64).ravel()
        c0 = np.asarray(cand[0], np.float64).ravel()
        noise, signal = float(np.sum((r0 - c0) ** 2)), float(np.sum(r0 ** 2))
        sqnr = math.inf if noise == 0 else (-math.inf if signal == 0 else 10.0 * math.log10(signal / noise))
        entry: dict = {"sample": name, "sqnr_db": sqnr, "max_abs": float(np.max(np.abs(r0 - c0))) if r0.size else 0.0}
        first = classification[0]
        if (first.kind is OutputKind.CLASS_SCORES) if isinstance(first, KindChoice) else first:
            entry["reference_top1"], entry["candidate_top1"] = int(r0.argmax()), int(c0.argmax())
            if label is not None:
                self.labelled += 1
                self.reference_correct += int(entry["reference_top1"] == label)
                self.candidate_correct += int(entry["candidate_top1"] == label)
                entry["label"] = int(label)
            if entry["reference_top1"] != entry["candidate_top1"]:
                _keep_worst(self.flips, (sqnr, name, entry), self.top_k)
        _keep_worst(self.worst, (sqnr, name, entry), self.top_k)

    def add_corrupt(self, name: str, reason: str) -> None:
        self.corrupt += 1
        self.corrupt_names = sorted(self.corrupt_names + [f"{name}: {reason}"])[:MAX_CORRUPT_NAMES]

    def merge(self, other: "ParitySums") -> "ParitySums":
        for mine, theirs in zip(self.outputs, other.outputs):
            mine.merge(theirs)
        for name in ("samples", "labelled", "reference_correct", "candidate_correct", "corrupt"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.corrupt_names = sorted(self.corrupt_names + other.corrupt_names)[:MAX_CORRUPT_NAMES]
        for item in other.worst:
            _keep_worst(self.worst, item, self.top_k)
        for item in other.flips:
            _keep_worst(self.flips, item, self.top_k)
        return self

    def worst_samples(self) -> List[dict]:
        return [e for _, _, e in self.worst]

    def flipped_samples(self) -> List[dict]:
        return [e for _, _, e in self.flips]


def _order(item: Tuple[float, str, dict]) -> Tuple[float, str]:
    return (item[0], item[1])


def _keep_worst(kept: List[Tuple[float, str, dict]], item: Tuple[float, str, dict], k: int) -> None:
    """Keep the k items with the lowest (sqnr, name), sorted: the same set whatever the arrival order."""
    keys = [_order(i) for i in kept]
    position = bisect.bisect(keys, _order(item))
    if position < k:
        kept.insert(position, item)
        del kept[k:]
