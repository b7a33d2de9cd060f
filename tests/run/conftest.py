"""Fixtures of the device-runner tests (helpers live in runtools.py)."""
import shutil
from pathlib import Path

import pytest

from tests.run.runtools import KWS_INT8, SshServer


@pytest.fixture
def kws_int8() -> Path:
    if not KWS_INT8.is_file():
        pytest.fail(f"MLPerf Tiny KWS int8 fixture not found at {KWS_INT8} (committed under tests/fixtures/mlperf_tiny)")
    return KWS_INT8


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    if not (shutil.which("sshd") or Path("/usr/sbin/sshd").exists()) or not shutil.which("ssh"):
        pytest.skip("OpenSSH server/client not installed (apt-get install openssh-server openssh-client)")
    server = SshServer(tmp_path_factory.mktemp("sshd"))
    try:
        yield server
    finally:
        server.stop()
