"""The committed third-party fixtures are the upstream files: every file matches SHA256SUMS, and nothing
unlisted sits beside them (tests/fixtures/mlperf_tiny/README.md gives the source repository and commit)."""
import hashlib
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "mlperf_tiny"
DOCS = {"SHA256SUMS", "README.md", "LICENSE.md"}


def _listed() -> dict:
    sums = {}
    for line in (FIXTURES / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        sums[name.removeprefix("./")] = digest
    return sums


def test_every_fixture_matches_its_sha256():
    sums = _listed()
    assert len(sums) == 11
    wrong = {name: hashlib.sha256((FIXTURES / name).read_bytes()).hexdigest()
             for name in sums if hashlib.sha256((FIXTURES / name).read_bytes()).hexdigest() != sums[name]}
    assert not wrong, f"fixtures differ from SHA256SUMS: {sorted(wrong)}"


def test_no_unlisted_files_and_license_present():
    present = {str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*") if p.is_file()}
    assert present - DOCS == set(_listed())
    assert "Apache License" in (FIXTURES / "LICENSE.md").read_text()
    readme = (FIXTURES / "README.md").read_text()
    assert "1afd2c9820f795965a6134facd0b4dfae41ef23f" in readme and "Apache-2.0" in readme


def test_fixtures_stay_small():
    total = sum(p.stat().st_size for p in FIXTURES.rglob("*") if p.is_file())
    assert total < 10 * 1024 * 1024, f"fixtures hold {total} bytes; keep them under 10 MB"
