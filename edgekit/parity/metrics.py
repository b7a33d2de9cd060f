"""Numeric agreement metrics between reference and candidate outputs."""
from __future__ import annotations

import math
from typing import Dict, Optional

import numpy as np

from edgekit.parity.output_kind import OutputKind, mask_overlap, topk_hits


def sqnr_db(reference: np.ndarray, candidate: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio in dB (inf when identical)."""
    ref = np.asarray(reference, np.float64)
    noise = float(np.sum((ref - np.asarray(candidate, np.float64)) ** 2))
    signal = float(np.sum(ref**2))
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def cosine(reference: np.ndarray, candidate: np.ndarray) -> float:
    a = np.asarray(reference, np.float64).ravel()
    b = np.asarray(candidate, np.float64).ravel()
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))


def output_metrics(
    reference: np.ndarray,
    candidate: np.ndarray,
    *,
    classification: bool = False,
    kind: Optional[OutputKind] = None,
    reference_raw: Optional[np.ndarray] = None,
    candidate_raw: Optional[np.ndarray] = None,
) -> Dict[str, float]:
    """Metrics over all samples of one output; arrays are (samples, ...) in float terms.

    ``kind`` (edgekit.parity.output_kind) adds the kind's own metric: top1_agreement for class scores,
    topk_agreement for detection scores, mask_iou for masks; without it ``classification`` says whether
    top1_agreement is computed. ``*_raw`` are the stored integer values; when both are integer,
    bit_exact_fraction is added.
    """
    if kind is not None:
        classification = kind is OutputKind.CLASS_SCORES
    ref = np.asarray(reference, np.float64)
    cand = np.asarray(candidate, np.float64)
    diff = ref - cand
    ref_norm = float(np.linalg.norm(ref))
    metrics: Dict[str, float] = {
        "cosine": cosine(ref, cand),
        "sqnr_db": sqnr_db(ref, cand),
        "rmse": float(np.sqrt(np.mean(diff**2))),
        "mae": float(np.mean(np.abs(diff))),
        "rel_l2": float(np.linalg.norm(diff) / ref_norm) if ref_norm else float(np.linalg.norm(diff)),
        "max_abs": float(np.max(np.abs(diff))) if diff.size else 0.0,
    }
    if classification:
        r = ref.reshape(len(ref), -1).argmax(axis=1)
        c = cand.reshape(len(cand), -1).argmax(axis=1)
        metrics["top1_agreement"] = float(np.mean(r == c))
    if kind is OutputKind.DETECTION_SCORES:
        hits, total = topk_hits(ref, cand)
        metrics["topk_agreement"] = hits / total if total else 1.0
    if kind is OutputKind.MASK:
        inter, union = mask_overlap(ref, cand)
        metrics["mask_iou"] = inter / union if union else 1.0
    if (
        reference_raw is not None
        and candidate_raw is not None
        and np.issubdtype(reference_raw.dtype, np.integer)
        and np.issubdtype(candidate_raw.dtype, np.integer)
        and reference_raw.shape == candidate_raw.shape
    ):
        equal = reference_raw == candidate_raw
        metrics["bit_exact_fraction"] = float(np.mean(equal))
        metrics["differing_elements"] = int(equal.size - int(equal.sum()))
    return metrics


def accuracy(outputs: np.ndarray, labels: np.ndarray) -> float:
    pred = np.asarray(outputs).reshape(len(outputs), -1).argmax(axis=1)
    return float(np.mean(pred == np.asarray(labels)))
