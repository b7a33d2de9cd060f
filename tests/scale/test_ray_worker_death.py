"""A Ray worker that dies mid-run is restarted by Ray and its chunk retried: the merged result equals the
single-process one. The death is real: the actor process kills itself (SIGKILL) inside its first batch, once
(a marker file records that it happened and which process died)."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

from edgekit.parity.runners import open_runner
from edgekit.scale import ray_parity as ray_parity_module
from edgekit.scale.ray_parity import ParityActor, RaySettings, ray_parity
from edgekit.scale.sources import list_source
from tests.conftest import MLPERF

ray = pytest.importorskip("ray", reason="ray is pinned in requirements.lock (make install)")
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("local_ray")]  # the package's shared local Ray

KWS_FLOAT = MLPERF / "kws_ref_model_float32.tflite"
KWS_INT8 = MLPERF / "kws_ref_model_int8.tflite"


def dying_once_actor(marker: Path) -> type:
    """A ParityActor whose process SIGKILLs itself in the first batch any actor of this run sees."""

    class DyingOnceActor(ParityActor):
        def __call__(self, batch: dict) -> dict:
            try:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return super().__call__(batch)
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)
            raise AssertionError("unreachable")

    return DyingOnceActor


def test_a_worker_killed_mid_run_is_retried_and_the_result_is_unchanged(tmp_path, monkeypatch):
    from edgekit.parity.compare import compare
    from edgekit.parity.tolerance import Tolerance

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])   # workers get the test's actor class by value
    tol = Tolerance(min_cosine=0.9, min_top1=0.5)
    inputs = open_runner(KWS_FLOAT).input_specs()
    x = np.random.default_rng(11).normal(0, 20, (24, *inputs[0].shape[1:])).astype(np.float32)
    data = tmp_path / "kws.npy"
    np.save(data, x)
    marker = tmp_path / "died.pid"
    monkeypatch.setattr(ray_parity_module, "ParityActor", dying_once_actor(marker))
    report = ray_parity(KWS_FLOAT, KWS_INT8, list_source(data, inputs, chunk=6), settings=RaySettings(workers=1),
                        tolerance=tol, top_k=3)
    dead = int(marker.read_text())
    with pytest.raises(ProcessLookupError):   # the actor process really died
        os.kill(dead, 0)
    local = compare(open_runner(KWS_FLOAT), open_runner(KWS_INT8), [[x[i:i + 1]] for i in range(len(x))], tolerance=tol)
    assert report.samples == local.samples == 24 and report.data["execution"]["samples"] == 24
    assert report.passed == local.passed
    for a, b in zip(report.outputs, local.outputs):
        a, b = a.metrics(), b.metrics()
        for key in ("cosine", "sqnr_db", "rmse", "top1_agreement"):
            assert np.isclose(a[key], b[key], rtol=1e-9, atol=0), (key, a[key], b[key])
