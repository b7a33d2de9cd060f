"""Fixtures of the Ray tests."""
import os

import pytest


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray (2 CPUs) for the module that asks for it (`pytestmark = pytest.mark.usefixtures("local_ray")`)."""
    ray = pytest.importorskip("ray", reason="ray is pinned in requirements.lock (make install)")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()
