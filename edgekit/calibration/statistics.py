"""Activation statistics of a float model over a calibration set: min/max and a fine histogram
per tensor, computed once per (model, data) fingerprint and cached on disk."""
from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, Optional, Sequence

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
    for sample in samples:
        model.run(sample, kind="debug")
        for i, v in model.tensor_values(indices).items():
            lo[i] = min(lo[i], float(v.min()))
            hi[i] = max(hi[i], float(v.max()))
        if progress:
            progress(1)
    hists = {i: np.zeros(NUM_BINS, dtype=np.int64) for i in indices}
    counts = {i: 0 for i in indices}
    for sample in samples:
        model.run(sample, kind="debug")
        for i, v in model.tensor_values(indices).items():
            hists[i] += _histogram(v, lo[i], hi[i])
            counts[i] += v.size
        if progress:
            progress(1)
    stats = {i: TensorStats(i, names[i], lo[i], hi[i], hists[i], counts[i]) for i in indices}
    if key is not None:
        _save_cache(key, stats)
    return stats


def _histogram(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    flat = values.astype(np.float64, copy=False).ravel()
    if hi <= lo:
        out = np.zeros(NUM_BINS, dtype=np.int64)
        out[0] = flat.size
        return out
    pos = ((flat - lo) * (NUM_BINS / (hi - lo))).astype(np.int64)
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

