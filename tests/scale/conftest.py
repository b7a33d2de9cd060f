"""Fixtures of the Ray tests."""
import os

import pytest


@pytest.fixture(scope="package")
def local_ray():
    """One local Ray (2 CPUs) shared by every test module of tests/scale that asks for it
    (`pytestmark = pytest.mark.usefixtures("local_ray")`): each start costs 10-60 s on a 2-core CI machine.
    Started the way `--ray` starts one (retried if it times out under load); stopped after the package."""
    ray = pytest.importorskip("ray", reason="ray is pinned in requirements.lock (make install)")
    from edgekit.scale.ray_start import start_local_ray

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    start_local_ray(ray, num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()
