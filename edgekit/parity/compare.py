"""Run a reference and a candidate on the same inputs and compare every output (-> ``ParityReport``)."""
from __future__ import annotations

import logging
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from edgekit.calibration.dataset import InputSpec, Sample
from edgekit.errors import UserError
from edgekit.parity.metrics import accuracy, output_metrics
from edgekit.parity.output_kind import OutputKind, detect_kind, overrides_for
from edgekit.parity.result import Accuracy, OutputMetrics, ParityReport
from edgekit.parity.runners import ModelRunner
from edgekit.parity.tolerance import Tolerance

__all__ = ["ParityReport", "compare", "check_compatible", "is_classification"]

log = logging.getLogger(__name__)


def check_compatible(reference: Sequence[InputSpec], candidate: Sequence[InputSpec]) -> None:
    problems = []
    if len(reference) != len(candidate):
        problems.append(f"reference has {len(reference)} inputs, candidate {len(candidate)}")
    for r, c in zip(reference, candidate):
        if not _shapes_agree(tuple(r.shape), tuple(c.shape)):
            problems.append(f"input shapes differ: reference {r.name!r} {tuple(r.shape)} vs candidate {c.name!r} {tuple(c.shape)}")
    if problems:
        raise UserError("models are not comparable: " + "; ".join(problems), fix="compare models with the same input layout")


def _shapes_agree(reference: Tuple[int, ...], candidate: Tuple[int, ...]) -> bool:
    """Equal shapes, a dynamic dimension (<= 0, e.g. a batch of -1) matching any size on the other side."""
    return len(reference) == len(candidate) and all(r <= 0 or c <= 0 or r == c for r, c in zip(reference, candidate))


def compare(
    reference: ModelRunner,
    candidate: ModelRunner,
    samples: Sequence[Sample],
    *,
    tolerance: Tolerance,
    labels: Optional[Sequence[int]] = None,
    progress: Optional[Callable[[int], None]] = None,
) -> ParityReport:
    check_compatible(reference.input_specs(), candidate.input_specs())
    names = candidate.output_names()
    overrides = overrides_for(names, tolerance.output_kinds)  # a wrong name fails before any inference
    ref_out: List[List[np.ndarray]] = []
    cand_out: List[List[np.ndarray]] = []
    ref_raw: List[List[np.ndarray]] = []
    cand_raw: List[List[np.ndarray]] = []
    for sample in samples:
        r, rr = reference.run(sample)
        c, cr = candidate.run(sample)
        ref_out.append(r), cand_out.append(c), ref_raw.append(rr), cand_raw.append(cr)
        if progress:
            progress(1)
    outputs: List[OutputMetrics] = []
    failures: List[str] = []
    input_sizes = [int(np.prod(spec.shape[1:])) for spec in reference.input_specs()]
    kinds = []
    for k, name in enumerate(names):
        ref = np.stack([o[k] for o in ref_out])
        cand = np.stack([o[k] for o in cand_out])
        if ref.shape != cand.shape:
            raise UserError(f"output {name!r} shapes differ: reference {ref.shape[1:]} vs candidate {cand.shape[1:]}")
        choice = detect_kind(ref, input_sizes=input_sizes, labelled=labels is not None and k == 0,
                             override=overrides.get(name))
        kinds.append(choice.kind)
        metrics = output_metrics(
            ref, cand,
            kind=choice.kind,
            reference_raw=np.stack([o[k] for o in ref_raw]),
            candidate_raw=np.stack([o[k] for o in cand_raw]),
        )
        outputs.append(OutputMetrics(name=name, kind=choice.kind.value, kind_reason=choice.reason, **metrics))
        failures.extend(tolerance.failures(name, metrics, choice.kind.value))
    top1 = None
    if labels is not None and names and kinds[0] is OutputKind.CLASS_SCORES:
        from edgekit.calibration.labels import check_label_range

        y = np.asarray(labels)
        check_label_range(y, int(np.stack([o[0] for o in ref_out]).reshape(len(ref_out), -1).shape[1]), "the data's labels")
        top1 = Accuracy.of(len(y), accuracy(np.stack([o[0] for o in ref_out]), y),
                           accuracy(np.stack([o[0] for o in cand_out]), y))
    return ParityReport(samples=len(samples), tolerance=tolerance, failures=failures, outputs=outputs, accuracy=top1,
                        reference=reference.describe(), candidate=candidate.describe())


def is_classification(outputs: np.ndarray, input_sizes: Sequence[int] = ()) -> bool:
    """A (samples, classes) or (samples, 1, classes) output with 2..10000 classes that is not
    the size of an input (an autoencoder reconstructs its input; that is not a class vector)."""
    per_sample = outputs.reshape(len(outputs), -1).shape[1]
    squeezed = [d for d in outputs.shape[1:] if d != 1]
    return len(squeezed) == 1 and 1 < per_sample <= 10000 and per_sample not in set(input_sizes)
