"""Fixtures for the preprocessing tests: the real photos and the generated edge cases."""
import shutil
from pathlib import Path

import pytest

from tests.preprocessing.edge_cases import CORRUPT, PHOTO_FILES, PHOTOS, write_edge_cases


@pytest.fixture(scope="session")
def edge_dir(tmp_path_factory) -> Path:
    """Generated edge cases (odd sizes, EXIF, gray, alpha, 16-bit, CMYK, corrupt), written once."""
    return write_edge_cases(tmp_path_factory.mktemp("edge") / "edge")


@pytest.fixture(scope="session")
def photo_paths():
    return [PHOTOS / name for name in PHOTO_FILES]


@pytest.fixture(scope="session")
def decodable_paths(edge_dir, photo_paths):
    """The real photos and every edge case the reference can decode."""
    return photo_paths + sorted(p for p in edge_dir.iterdir() if p.name not in CORRUPT)


@pytest.fixture(scope="session")
def mixed_dir(tmp_path_factory, edge_dir, photo_paths) -> Path:
    """One folder: photos + all edge cases, corrupt files included."""
    folder = tmp_path_factory.mktemp("mixed") / "images"
    shutil.copytree(edge_dir, folder)
    for p in photo_paths:
        shutil.copy(p, folder / p.name)
    return folder
