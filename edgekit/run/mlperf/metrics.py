"""The MLPerf Tiny reference runner's accuracy metrics and results.txt lines, computed exactly as the runner does.

Source: mlcommons/tiny, benchmark/runner/main.py (the version with ``summarize_result(result, power)``):
``normalize_probabilities`` (scores / their sum, when a result has more than one value), per file the mean of its
windows' (normalized) results, ``calculate_accuracy`` (classification: argmax vs label, in percent; anomaly
detection: the best (precision + recall) / 2 over 100 thresholds) and ``calculate_auc`` (101 thresholds
0.00..1.00 per class, or min..max of the AD score; fpr/tpr forced to 1 at the first threshold; trapezoids;
classification: the mean over ``range(n_classes)`` with n_classes = the number of distinct labels, a class
without positives or negatives contributing tpr/fpr 0). Printed lines (main.py and script.py):
``MMDD.HHMMSS ulp-mlperf: Top 1% = {:2.1f}``, ``AUC = {:.3f}``, ``Median throughput is {:>10.3f} inf./sec.``.

That main.py passes calculate_accuracy's value to its "AUC" line and calculate_auc's to "Top 1%" (the names are
swapped there); edgekit prints each value under the label that names it.
"""
from __future__ import annotations

from datetime import datetime
from typing import List, Optional, Sequence, Tuple

import numpy as np


def normalize(scores: Sequence[float]) -> List[float]:
    """main.py normalize_probabilities: each result vector of more than one value divided by its sum."""
    values = [float(s) for s in scores]
    if len(values) == 1:
        return values
    total = sum(values)
    return [s / total for s in values]


def file_scores(windows: Sequence[Sequence[float]]) -> np.ndarray:
    """The runner's y_pred row of one file: the mean of its windows' normalized results."""
    return np.mean(np.asarray([normalize(w) for w in windows], dtype=np.float64), axis=0)


def runner_accuracy(y_pred: np.ndarray, labels: np.ndarray) -> float:
    """main.py calculate_accuracy, in percent."""
    y_pred, labels = np.asarray(y_pred, dtype=np.float64), np.asarray(labels)
    if y_pred.shape[1] == 1:
        thresholds = np.amin(y_pred) + np.arange(0.0, 1.0, .01) * (np.amax(y_pred) - np.amin(y_pred))
        best = 0.0
        for threshold in thresholds:
            binary = (y_pred > threshold).astype(int)
            fp = np.sum(binary[labels == 0] == 1)
            tp = np.sum(binary[labels == 1] == 1)
            fn = np.sum(binary[labels == 1] == 0)
            precision = tp / (tp + fp + 1e-8)
            recall = tp / (tp + fn + 1e-8)
            best = max(best, 100 * (precision + recall) / 2)
        return float(best)
    return float(100 * np.sum(labels == np.argmax(y_pred, axis=1)) / len(y_pred))


def runner_auc(y_pred: np.ndarray, labels: np.ndarray) -> float:
    """main.py calculate_auc (the runner's simplified ROC AUC over 101 thresholds)."""
    y_pred, labels = np.asarray(y_pred, dtype=np.float64), np.asarray(labels)
    n_classes = len(set(int(v) for v in labels))
    if y_pred.shape[1] == 1:
        thresholds = np.amin(y_pred) + np.arange(0.0, 1.01, .01) * (np.amax(y_pred) - np.amin(y_pred))
        tpr, fpr = np.zeros(len(thresholds)), np.zeros(len(thresholds))
        n_normal = np.sum(labels == 0)
        for i in range(1, len(thresholds)):
            binary = (y_pred > thresholds[i]).astype(int)
            tpr[i] = np.sum(binary[labels == 1]) / float(np.sum(labels == 1))
            fpr[i] = np.sum(binary[labels == 0]) / float(n_normal)
        fpr[0] = tpr[0] = 1
        return float(sum(0.5 * (tpr[i] + tpr[i + 1]) * (fpr[i] - fpr[i + 1]) for i in range(len(thresholds) - 1)))
    thresholds = np.arange(0.0, 1.01, 0.01)
    roc = np.zeros(n_classes)
    for c in range(n_classes):
        positives = int(np.sum(labels == c))
        negatives = len(labels) - positives
        tpr, fpr = np.zeros(len(thresholds)), np.zeros(len(thresholds))
        for i in range(1, len(thresholds)):
            above = y_pred[:, c] > thresholds[i]
            tp = int(np.sum(above & (labels == c)))
            fp = int(np.sum(above & (labels != c)))
            fpr[i] = fp / float(negatives) if negatives else 0
            tpr[i] = tp / float(positives) if positives else 0
        fpr[0] = tpr[0] = 1
        for i in range(len(thresholds) - 1):
            roc[c] += 0.5 * (tpr[i] + tpr[i + 1]) * (fpr[i] - fpr[i + 1])
    return float(np.mean(roc))


def missing_classes(labels: Sequence[int], classes: int) -> List[int]:
    """Classes without a file: the runner's calculate_auc then divides by zero positives (numpy warns, nan) or,
    with one class only, scores nothing; MLPerf Tiny datasets hold every class."""
    present = set(int(v) for v in labels)
    return [c for c in range(classes) if c not in present]


def stamp(now: Optional[datetime] = None) -> str:
    """The runner's line prefix ("%m%d.%H%M%S", script.py / main.py)."""
    return (now or datetime.now()).strftime("%m%d.%H%M%S")


def accuracy_lines(accuracy_pct: float, auc_value: float, now: Optional[datetime] = None) -> List[str]:
    """main.py's two accuracy-mode lines, each value under the label that names it."""
    t = stamp(now)
    return [f"{t} ulp-mlperf: Top 1% = {accuracy_pct:2.1f}", f"{t} ulp-mlperf: AUC = {auc_value:.3f}"]


def window_lines(index: int, iterations: int, runtime_s: float, throughput: float, results: Sequence[float],
                 now: Optional[datetime] = None) -> List[str]:
    """script.py _print_AP_results: one performance window."""
    t = stamp(now)
    return [f"{t} ulp-mlperf: Performance results for window {index}:",
            f"{t} ulp-mlperf:   # Inferences : {iterations:>13}",
            f"{t} ulp-mlperf:   Runtime      : {runtime_s:>10.3f} sec.",
            f"{t} ulp-mlperf:   Throughput   : {throughput:>10.3f} inf./sec.",
            f"{t} ulp-mlperf:   m-results    : {[float(v) for v in results]}"]


def median_lines(median: float, windows_s: Sequence[float], loops: int, now: Optional[datetime] = None
                 ) -> Tuple[List[str], bool]:
    """main.py summarize_result, performance mode: ERROR 1 (loop count not 5), ERROR 2 (a window under 10 s; the
    runner times the whole loop on the host, edgekit checks each device-timed window), else the median."""
    t = stamp(now)
    if loops != 5:
        return [f"{t} ulp-mlperf: ERROR 1 \u2013 loop_count was not exactly 5."], False
    if any(s < 10.0 for s in windows_s):
        return [f"{t} ulp-mlperf: ERROR 2 \u2013 loop exited before 10 seconds elapsed."], False
    dashes = f"{t} ulp-mlperf: ---------------------------------------------------------"
    return [dashes, f"{t} ulp-mlperf: Median throughput is {median:>10.3f} inf./sec.", dashes], True
