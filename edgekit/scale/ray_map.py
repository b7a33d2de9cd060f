"""Run a callable class over listed chunks on Ray Data and merge what each chunk returns.

The actor (one per worker, holding its models) turns a chunk into a mergeable summary; the driver merges
the summaries as they arrive. Shared by calib-check and preprocess-parity at dataset scale.
"""
from __future__ import annotations

import contextlib
import pickle
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy as np
from typing_extensions import TypedDict

from edgekit.scale.ray_parity import RaySettings, _ray, connect
from edgekit.scale.ray_start import session_dir, shutdown_local_ray


class ChunkActor:
    """Base of a map_batches callable class: ``process(chunk)`` returns one picklable summary per chunk."""

    def process(self, chunk: Any) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def __call__(self, batch: dict) -> dict:
        out = [pickle.dumps(self.process(pickle.loads(blob))) for blob in batch["chunk"]]
        return {"sums": np.array(out, dtype=object)}


@contextlib.contextmanager
def ray_session(settings: RaySettings) -> Iterator[Any]:
    """Ray joined or started for the block (shut down afterwards only when this block started it)."""
    ray = _ray()
    started = connect(settings)
    session = session_dir(ray) if started and settings.address is None else None
    try:
        yield ray
    finally:
        if started:
            shutdown_local_ray(ray, session)


@dataclass
class MapTiming:
    wall_time_s: float
    cluster_cpus: Optional[float]


def map_chunks(actor: type, args: tuple, chunks: Sequence[Any], settings: RaySettings,
               on_result: Callable[[Any], None]) -> MapTiming:
    """``actor(*args)`` per worker over ``chunks`` (Ray must be connected: ``ray_session``); ``on_result``
    gets every chunk's summary, in whatever order they finish."""
    ray = _ray()
    import ray.data

    t0 = time.perf_counter()
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    items = [{"chunk": pickle.dumps(c)} for c in chunks]
    ds = ray.data.from_items(items, override_num_blocks=len(items))
    with warnings.catch_warnings():  # Ray 2.60 warns that max_restarts & co. will become named parameters
        warnings.simplefilter("ignore")
        results = ds.map_batches(
            actor, fn_constructor_args=args, batch_size=1, compute=ray.data.ActorPoolStrategy(size=settings.workers),
            num_cpus=1, max_restarts=-1, max_task_retries=-1,  # a dying worker is restarted and its chunk retried
        )
    for batch in results.iter_batches(batch_size=1, batch_format="numpy", prefetch_batches=0):
        for blob in batch["sums"]:
            on_result(pickle.loads(blob))
    return MapTiming(time.perf_counter() - t0, ray.cluster_resources().get("CPU"))


class Execution(TypedDict, total=False):
    """How a calib-check / preprocess-parity pass ran: in this process or on Ray, how fast."""

    engine: str
    workers: int
    samples: int
    wall_time_s: float
    samples_per_s: Optional[float]
    cluster_cpus: float
    images_listed: str  # preprocess-parity on Ray: which images the per-image list names


def execution(settings: Optional[RaySettings], samples: int, wall: float, cpus: Optional[float] = None) -> Execution:
    """The report's "how it ran" record (engine, workers, samples/s, wall time)."""
    out: Execution = {"engine": settings.engine if settings else "in-process", "workers": settings.workers if settings else 1,
           "samples": samples, "wall_time_s": round(wall, 3),
           "samples_per_s": round(samples / wall, 2) if wall > 0 else None}
    if cpus is not None:
        out["cluster_cpus"] = cpus
    return out
