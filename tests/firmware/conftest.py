"""Fixtures shared by the firmware tests."""
from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def selftest(tmp_path_factory):
    """Build (once per session and board/mode) the protocol self-test firmware: selftest(board, mode) -> ELF.
    Tests only read the ELF (copy it to change anything)."""
    from edgekit.firmware import boards as B

    folder = tmp_path_factory.mktemp("selftest")
    cache = {}

    def get(board: str, mode: str = "serve") -> Path:
        if (board, mode) not in cache:
            cache[(board, mode)] = B.build_selftest(B.load_board(board), folder / board, mode)
        return cache[(board, mode)]

    return get
