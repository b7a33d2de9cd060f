"""What an output is (class scores, a regression, detection anchors, a mask, one value), chosen per output, so
parity scores each with metrics that mean something for it.

A landmark vector scored by top-1 agreement, or a one-value face-presence output scored by a cosine, says nothing
about the model. The kind is detected from the reference output's shape and values (or named by the user with
``--output-kind NAME=KIND``), and every report says which kind was chosen and why.

| kind | typical output | metrics added to cosine / SQNR / errors | gated by |
|---|---|---|---|
| class_scores | (classes,) probabilities, or the labelled output | top1_agreement | --min-top1 |
| regression | landmarks, embeddings, logits of unknown meaning | (errors only) | cosine, SQNR |
| boxes | (anchors >= 64, 4+ coordinates) | (errors only) | cosine, SQNR |
| detection_scores | (anchors >= 64, 1) | topk_agreement (top-10 anchors) | --min-topk |
| mask | (H, W, 1) or (H, W, C) with H, W >= 8, probabilities or logits | mask_iou | --min-iou |
| scalar | one value per sample | (errors only; cosine is not gated) | SQNR |
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Dict, Iterable, Optional, Sequence, Tuple

import numpy as np

from edgekit.errors import UserError

ANCHORS_MIN = 64        # detection heads have hundreds of anchors; fewer rows is a small regression output
TOP_K_ANCHORS = 10      # topk_agreement: overlap of the 10 highest-scoring anchors
MASK_SIDE_MIN = 8       # a spatial map smaller than 8x8 is a feature vector, not a mask
MASK_CHANNELS_MAX = 32
PROBABILITY_SUM_TOLERANCE = 0.05  # an int8 softmax (1/256 steps, each rounded) sums to 1 within classes/512


class OutputKind(str, Enum):
    CLASS_SCORES = "class_scores"
    REGRESSION = "regression"
    BOXES = "boxes"
    DETECTION_SCORES = "detection_scores"
    MASK = "mask"
    SCALAR = "scalar"


KIND_NAMES = tuple(k.value for k in OutputKind)


@dataclass(frozen=True)
class KindChoice:
    """The kind of one output and why it was chosen."""

    kind: OutputKind
    reason: str


def parse_output_kinds(values: Optional[Iterable[str]]) -> Tuple[Tuple[str, str], ...]:
    """``--output-kind NAME=KIND`` values -> ((name, kind), ...); every bad value is reported at once."""
    pairs, problems = [], []
    for value in values or ():
        name, sep, kind = str(value).partition("=")
        name, kind = name.strip(), kind.strip()
        if not sep or not name:
            problems.append(f"{value!r} is not NAME=KIND")
        elif kind not in KIND_NAMES:
            problems.append(f"{value!r}: unknown kind {kind!r}")
        else:
            pairs.append((name, kind))
    if problems:
        raise UserError("--output-kind: " + "; ".join(problems),
                        fix=f"give --output-kind OUTPUT_NAME=KIND with KIND one of {', '.join(KIND_NAMES)}")
    return tuple(pairs)


def _is_probabilities(rows: np.ndarray) -> bool:
    return bool(rows.size and np.all(rows >= 0) and np.all(rows <= 1)
                and np.all(np.abs(rows.sum(axis=1) - 1.0) <= PROBABILITY_SUM_TOLERANCE))


def detect_kind(reference: np.ndarray, *, input_sizes: Sequence[int] = (), labelled: bool = False,
                override: Optional[str] = None) -> KindChoice:
    """The kind of an output from the reference's values, shaped (samples, ...).

    ``labelled``: the data carries class labels and this is the model's first output (the classifier).
    ``override``: the user's ``--output-kind`` for this output.
    """
    if override is not None:
        return KindChoice(OutputKind(override), "--output-kind")
    values = np.asarray(reference, np.float64)
    samples = max(len(values), 1)
    per_sample = values.reshape(samples, -1).shape[1] if values.size else 0
    shape = tuple(values.shape[1:])
    squeezed = tuple(d for d in shape if d != 1)
    if per_sample <= 1:
        return KindChoice(OutputKind.SCALAR, "one value per sample")
    if len(squeezed) == 2 and squeezed[0] >= ANCHORS_MIN and shape[-1] == squeezed[1] and squeezed[1] >= 4 \
            and squeezed[1] <= 64 and len(shape) - shape.count(1) == 2:
        return KindChoice(OutputKind.BOXES, f"{squeezed[0]} anchors x {squeezed[1]} coordinates")
    if len(squeezed) == 1 and len(shape) >= 2 and shape[-1] == 1 and squeezed[0] >= ANCHORS_MIN:
        return KindChoice(OutputKind.DETECTION_SCORES, f"{squeezed[0]} anchors x 1 score")
    if len(squeezed) in (2, 3) and len(shape) >= 3:
        spatial = [d for d in shape[-3:-1]] if len(shape) >= 3 else []
        channels = shape[-1]
        if len(spatial) == 2 and min(spatial) >= MASK_SIDE_MIN and channels <= MASK_CHANNELS_MAX:
            return KindChoice(OutputKind.MASK, f"{spatial[0]}x{spatial[1]} map with {channels} channel(s)")
    if len(squeezed) == 1 and per_sample <= 10000 and per_sample not in set(input_sizes):
        rows = values.reshape(samples, -1)
        if labelled:
            return KindChoice(OutputKind.CLASS_SCORES, "the data's labels index this output")
        if _is_probabilities(rows):
            return KindChoice(OutputKind.CLASS_SCORES, "every row is a probability distribution")
        return KindChoice(OutputKind.REGRESSION, "a vector that is not a probability distribution (landmarks, "
                                                 "embeddings or logits: say --output-kind NAME=class_scores for logits)")
    return KindChoice(OutputKind.REGRESSION, "default for this shape")


def overrides_for(names: Sequence[str], pairs: Iterable[Tuple[str, str]]) -> Dict[str, str]:
    """{output name: kind} for the outputs the user named; an unknown name is refused with the valid ones."""
    given = dict(pairs)
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise UserError(f"--output-kind names {', '.join(map(repr, unknown))}, which the model does not have",
                        fix=f"name one of the model's outputs: {', '.join(names)}")
    return given


def topk_hits(reference: np.ndarray, candidate: np.ndarray) -> Tuple[int, int]:
    """(hits, total) over samples: how many of each sample's top-K reference anchors are in the candidate's top-K."""
    ref = np.asarray(reference, np.float64).reshape(len(reference), -1)
    cand = np.asarray(candidate, np.float64).reshape(len(candidate), -1)
    k = min(TOP_K_ANCHORS, ref.shape[1])
    hits = 0
    for r, c in zip(ref, cand):
        top_r = set(np.argsort(-r, kind="stable")[:k].tolist())
        top_c = set(np.argsort(-c, kind="stable")[:k].tolist())
        hits += len(top_r & top_c)
    return hits, k * len(ref)


def mask_overlap(reference: np.ndarray, candidate: np.ndarray) -> Tuple[int, int]:
    """(intersection, union) of the foreground pixels over samples: one channel thresholded at 0.5 for
    probabilities (values in [0, 1]) or 0 for logits; several channels: pixels whose arg-max class is not 0."""
    ref = np.asarray(reference, np.float64)
    cand = np.asarray(candidate, np.float64)
    if ref.shape[-1] == 1:
        threshold = 0.5 if (ref.min() >= 0 and ref.max() <= 1) else 0.0
        fr, fc = ref[..., 0] > threshold, cand[..., 0] > threshold
    else:
        fr, fc = ref.argmax(axis=-1) != 0, cand.argmax(axis=-1) != 0
    return int(np.sum(fr & fc)), int(np.sum(fr | fc))
