"""A local Ray start that fails: retried when it timed out, and what each failed attempt left running is killed.

A real failed start (the raylet timing out under load) cannot be provoked deterministically, so ``init`` here
does what that failure does: it starts real processes (as ray.init starts GCS and agents) and raises Ray's
message. The real successful start is covered by every other test in tests/scale.
"""
from __future__ import annotations

import subprocess
import sys
import types

import psutil
import pytest

from edgekit.errors import UserError
from edgekit.scale.ray_start import start_local_ray

TIMEOUT_MESSAGE = "The current node timed out during startup. This could happen because some of the Ray processes failed"


class FailingInit:
    """Starts a process per call (a stand-in GCS left behind) and raises, ``failures`` times; then succeeds."""

    def __init__(self, failures: int, message: str = TIMEOUT_MESSAGE) -> None:
        self.failures, self.message = failures, message
        self.calls: list[dict] = []
        self.started: list[subprocess.Popen] = []

    def __call__(self, **kwargs) -> None:
        self.calls.append(kwargs)
        if len(self.calls) <= self.failures:
            self.started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]))
            raise Exception(self.message)  # ray raises a bare Exception for this


@pytest.fixture
def fake_ray():
    shutdowns = []
    return types.SimpleNamespace(shutdown=lambda: shutdowns.append(1), shutdowns=shutdowns)


def _alive(proc: subprocess.Popen) -> bool:
    try:
        return psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_timed_out_start_is_retried_and_its_leftovers_killed(fake_ray):
    init = FailingInit(failures=1)
    start_local_ray(fake_ray, num_cpus=2, attempts=3, init=init, include_dashboard=False)
    assert len(init.calls) == 2
    assert init.calls[1] == {"num_cpus": 2, "include_dashboard": False}
    assert fake_ray.shutdowns == [1]
    assert not _alive(init.started[0]), "the failed attempt's process must be killed"


def test_every_attempt_timing_out_is_one_user_error_and_nothing_left(fake_ray):
    init = FailingInit(failures=5)
    with pytest.raises(UserError) as err:
        start_local_ray(fake_ray, num_cpus=1, attempts=3, init=init)
    assert len(init.calls) == 3
    assert "could not start a local Ray (3 attempt(s))" in str(err.value)
    assert "timed out during startup" in str(err.value)
    assert "--ray-address" in err.value.fix
    assert not any(_alive(p) for p in init.started)


def test_other_start_errors_are_not_retried(fake_ray):
    init = FailingInit(failures=5, message="ray.init: disk /tmp/ray is full")
    with pytest.raises(UserError, match=r"could not start a local Ray \(1 attempt\(s\)\): ray.init: disk"):
        start_local_ray(fake_ray, num_cpus=1, attempts=3, init=init)
    assert len(init.calls) == 1
    assert not _alive(init.started[0])


def test_children_started_before_are_left_alone(fake_ray):
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        init = FailingInit(failures=1)
        start_local_ray(fake_ray, num_cpus=1, attempts=2, init=init)
        assert _alive(bystander)
        assert not _alive(init.started[0])
    finally:
        bystander.kill()
        bystander.wait()
