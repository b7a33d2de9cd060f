"""Activation statistics of a float model over a calibration set: min/max and a fine histogram
per tensor, computed once per (model, data) fingerprint and cached on disk."""
from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence

import numpy as np

from edgekit.calibration.dataset import Sample

if TYPE_CHECKING:
    from edgekit.tflite_model import TFLiteModel

log = logging.getLogger(__name__)

NUM_BINS = 8192
STATS_VERSION = 1
Progress = Optional[Callable[[int], None]]


@dataclass
class TensorStats:
    """Observed values of one activation tensor."""

    index: int
    name: str
    min: float
    max: float
    hist: np.ndarray  # counts over NUM_BINS equal bins spanning [min, max]
    count: int

    @property
    def edges(self) -> np.ndarray:
        return np.linspace(self.min, self.max, len(self.hist) + 1)

    @property
    def is_nonnegative(self) -> bool:
        return self.min >= 0.0


def cache_dir() -> Path:
    base = os.environ.get("EDGEKIT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "edgekit"
    )
    return Path(base) / "stats"


def cache_key(model_sha256: str, data_fingerprint: str) -> str:
    return hashlib.sha256(f"v{STATS_VERSION}:{NUM_BINS}:{model_sha256}:{data_fingerprint}".encode()).hexdigest()


def collect_statistics(
    model: "TFLiteModel",
    samples: Sequence[Sample],
    *,
    key: Optional[str] = None,
    progress: Progress = None,
) -> Dict[int, TensorStats]:
    """Min/max (pass 1) then histograms (pass 2) of every activation tensor; cached by ``key``."""
    if key is not None:
        cached = _load_cache(key)
        if cached is not None:
            log.info("activation statistics taken from cache %s", key[:12])
            if progress:
                progress(2 * len(samples))
            return cached
    indices = model.activation_tensors()
    names = {i: model.tensor(i).name for i in indices}
    lo = {i: np.inf for i in indices}
    hi = {i: -np.inf for i in indices}
    budget = retained_bytes()
    retained: List[Dict[int, np.ndarray]] = []  # pass-1 values of the first samples that fit the budget

    for sample in samples:
        model.run(sample, kind="debug")
        keep: Optional[Dict[int, np.ndarray]] = {} if budget > 0 else None

        def observe(i: int, v: np.ndarray) -> None:
            lo[i] = min(lo[i], float(v.min()))
            hi[i] = max(hi[i], float(v.max()))
            if keep is not None:
                keep[i] = v.copy()

        model.visit_tensors(indices, observe)
        if keep is not None:
            budget -= sum(v.nbytes for v in keep.values())
            if budget >= 0:
                retained.append(keep)
        if progress:
            progress(1)
    hists = {i: np.zeros(NUM_BINS, dtype=np.int64) for i in indices}
    counts = {i: 0 for i in indices}

    def count(i: int, v: np.ndarray) -> None:
        hists[i] += _histogram(v, lo[i], hi[i])
        counts[i] += v.size

    done = len(retained)
    while retained:  # pass 2 from memory: the same values, no second inference (freed as they are counted)
        for i, v in retained.pop(0).items():
            count(i, v)
        if progress:
            progress(1)
    for sample in samples[done:]:  # the rest: run again
        model.run(sample, kind="debug")
        model.visit_tensors(indices, count)
        if progress:
            progress(1)
    stats = {i: TensorStats(i, names[i], lo[i], hi[i], hists[i], counts[i]) for i in indices}
    if key is not None:
        _save_cache(key, stats)
    return stats


def retained_bytes() -> int:
    """Memory for keeping pass-1 tensor values so pass 2 need not run the model again
    (EDGEKIT_STATS_MEMORY_MB, default 1024; 0 runs every sample twice). The statistics are the same either way."""
    try:
        mb = float(os.environ.get("EDGEKIT_STATS_MEMORY_MB", "1024"))
    except ValueError:
        mb = 1024.0
    return int(max(mb, 0.0) * 2**20)


def _histogram(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Counts over NUM_BINS equal bins of [lo, hi]: bin = int((float64(v) - lo) * (NUM_BINS / (hi - lo))), clipped."""
    flat = values.reshape(-1)
    if hi <= lo:
        out = np.zeros(NUM_BINS, dtype=np.int64)
        out[0] = flat.size
        return out
    scaled = np.subtract(flat, lo, dtype=np.float64)  # exact float32 -> float64, then the same float64 ops as before
    scaled *= NUM_BINS / (hi - lo)
    pos = scaled.astype(np.int64)
    np.clip(pos, 0, NUM_BINS - 1, out=pos)
    return np.bincount(pos, minlength=NUM_BINS)


def _save_cache(key: str, stats: Dict[int, TensorStats]) -> None:
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        order = sorted(stats)
        tmp = folder / f".{key}.{os.getpid()}.npz"
        np.savez(
            tmp,
            index=np.array(order, dtype=np.int64),
            name=np.array([stats[i].name for i in order]),
            min=np.array([stats[i].min for i in order]),
            max=np.array([stats[i].max for i in order]),
            count=np.array([stats[i].count for i in order], dtype=np.int64),
            hist=np.stack([stats[i].hist for i in order]),
        )
        os.replace(tmp, folder / f"{key}.npz")
    except OSError as exc:  # a read-only cache must not fail the run
        log.warning("could not cache activation statistics in %s: %s", folder, exc)


def _load_cache(key: str) -> Optional[Dict[int, TensorStats]]:
    path = cache_dir() / f"{key}.npz"
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            return {
                int(i): TensorStats(int(i), str(n), float(a), float(b), h.astype(np.int64), int(c))
                for i, n, a, b, h, c in zip(
                    data["index"], data["name"], data["min"], data["max"], data["hist"], data["count"]
                )
            }
    except (OSError, ValueError, KeyError) as exc:
        log.warning("ignoring unreadable statistics cache %s: %s", path, exc)
        return None

