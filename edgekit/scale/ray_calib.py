"""`calib-check --live DATA --ray`: the live-data passes on Ray Data.

Pass 1 (every run): each actor holds the float model and turns a chunk into ``LiveSums`` (input values on
bin edges fixed by the calibration set, activation min/max, exact clipping counts against the calibrated
ranges). Pass 2 (``--effect``): the live activation histograms on the merged min/max of pass 1, then the
two int8 models against float on the same chunks (edgekit.scale.ray_parity). Summaries merge in any order.
"""
from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, Optional, Tuple

from edgekit.errors import CalibrationDataError
from edgekit.preprocessing.calib_result import QuantizationEffect, SampleSet
from edgekit.preprocessing.live_sums import HistogramSums, InputEdges, LiveSums
from edgekit.scale.ray_map import ChunkActor, execution, map_chunks, ray_session
from edgekit.scale.sources import DEFAULT_CHUNK, Decoding, list_source, read_chunk

if TYPE_CHECKING:
    from edgekit.preprocessing.calib_check import LiveResult


class _FloatModelActor(ChunkActor):
    def __init__(self, model_data: bytes, decoding: Decoding) -> None:
        from edgekit.tflite_model import TFLiteModel

        self.model = TFLiteModel(model_data, source="float model (calib-check worker)")
        self.inputs = self.model.input_specs()
        self.decoding = decoding


class LiveActor(_FloatModelActor):
    """Pass 1: a chunk -> LiveSums."""

    def __init__(self, model_data: bytes, decoding: Decoding, edges: InputEdges, ranges: Dict[int, Tuple[float, float]],
                 indices: Tuple[int, ...]) -> None:
        super().__init__(model_data, decoding)
        self.edges, self.ranges, self.indices = edges, ranges, indices

    def process(self, chunk) -> LiveSums:
        sums = LiveSums.empty(self.edges, self.indices)
        for row in read_chunk(chunk, self.decoding, self.inputs):
            if row.sample is None:
                sums.add_corrupt(row.name, row.error)
            else:
                sums.add_sample(self.model, row.sample, self.edges, self.ranges)
        return sums


class HistogramActor(_FloatModelActor):
    """Pass 2 (--effect): a chunk -> HistogramSums on fixed limits (corrupt rows were counted in pass 1)."""

    def __init__(self, model_data: bytes, decoding: Decoding, limits: Dict[int, Tuple[float, float]]) -> None:
        super().__init__(model_data, decoding)
        self.limits = limits

    def process(self, chunk) -> HistogramSums:
        sums = HistogramSums.empty(self.limits)
        for row in read_chunk(chunk, self.decoding, self.inputs):
            if row.sample is not None:
                sums.add_sample(self.model, row.sample)
        return sums


def live_on_ray(float_model, path: Path, inputs, spec, *, limit: Optional[int], seed: int, edges: InputEdges,
                ranges, names: Dict[int, str], effect_of: Optional[Callable[..., QuantizationEffect]], settings, chunk: Optional[int],
                column: Optional[str], progress) -> "LiveResult":
    from edgekit.parity.tolerance import Tolerance
    from edgekit.preprocessing.calib_check import LiveResult
    from edgekit.scale.ray_parity import ray_parity

    source = list_source(Path(path), inputs, spec, chunk=chunk or DEFAULT_CHUNK, column=column, limit=limit, seed=seed)
    step = progress("live data (ray)", source.samples * (2 if effect_of else 1))
    sums = LiveSums.empty(edges, list(names))

    def merge(part: LiveSums) -> None:
        sums.merge(part)
        step(part.samples + part.corrupt)

    effect = stats = None
    with ray_session(settings):
        timing = map_chunks(LiveActor, (float_model.data, source.decoding, edges, ranges, tuple(names)), source.chunks,
                            settings, merge)
        if sums.samples == 0:
            raise CalibrationDataError([f"no usable samples in {path}"] + sums.corrupt_names[:10],
                                       fix="pass images/arrays that match the model input")
        wall, cpus = timing.wall_time_s, timing.cluster_cpus
        if effect_of is not None:
            hists = HistogramSums.empty({i: tuple(sums.activations.minmax[i]) for i in names})

            timing = map_chunks(HistogramActor, (float_model.data, source.decoding, hists.limits), source.chunks,
                                settings, hists.merge)
            step(source.samples)
            wall += timing.wall_time_s
            stats = hists.stats(names)
            with tempfile.TemporaryDirectory(prefix="edgekit-calib-check-") as work:
                reference = Path(work) / "float.tflite"
                reference.write_bytes(float_model.data)

                def evaluate(data: bytes, label: str):
                    candidate = Path(work) / f"int8_{label}.tflite"
                    candidate.write_bytes(data)
                    return ray_parity(reference, candidate, source, settings=settings, tolerance=Tolerance())

                effect = effect_of(stats, evaluate)
    info: SampleSet = {"path": str(path), "samples": sums.samples, "fingerprint": _listing_fingerprint(source),
            "skipped": sums.corrupt, "spec": source.spec.to_dict() if source.spec else None, "dataset": source.describe()}
    result = LiveResult(sums, stats, info, list(sums.corrupt_names), execution(settings, sums.samples, wall, cpus))
    result.effect = effect
    return result


def _listing_fingerprint(source) -> str:
    """sha256 of the listing (files, rows, chunks): the live data is not read on the driver."""
    return hashlib.sha256(repr([source.kind, [repr(c) for c in source.chunks]]).encode()).hexdigest()
