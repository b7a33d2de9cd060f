"""How the CLI reports errors: a user error is one message (its cause only with -v); an internal error (a bug in
edgekit) always prints its traceback."""
from __future__ import annotations

import pytest

import edgekit.cli
from edgekit.errors import InternalError


@pytest.fixture
def broken_profile(tmp_path, monkeypatch):
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "broken.yaml").write_text("name: broken\nkind: [mcu\n")  # unclosed flow sequence
    monkeypatch.setenv("EDGEKIT_DEVICES_DIR", str(folder))
    return folder / "broken.yaml"


def test_user_error_is_one_message_without_traceback(cli, capsys, broken_profile):
    assert cli("devices") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"edgekit devices: error: device profile {broken_profile} cannot be read")
    assert "Traceback" not in err and "Fix: fix the YAML syntax" in err


def test_verbose_user_error_shows_the_chained_cause(cli, capsys, broken_profile):
    assert cli("-v", "devices") == 2
    err = capsys.readouterr().err
    assert "yaml.parser.ParserError" in err  # the cause, chained with `from exc`
    assert "The above exception was the direct cause of the following exception" in err
    assert err.rstrip().splitlines()[-1] == "Fix: fix the YAML syntax"


def test_verbose_shows_a_cause_hidden_by_from_none(cli, capsys, monkeypatch):
    def refuse(args):
        try:
            {}["missing"]
        except KeyError:
            raise InternalError("lookup failed") from None

    monkeypatch.setattr(edgekit.cli, "_check_outdir", refuse)
    assert cli("-v", "devices") == 3
    err = capsys.readouterr().err
    assert "KeyError: 'missing'" in err and "InternalError: lookup failed" in err


def test_internal_error_prints_its_traceback_without_verbose(cli, capsys, monkeypatch):
    def bug(args):
        raise InternalError("the planner placed two live tensors at one offset")

    monkeypatch.setattr(edgekit.cli, "_check_outdir", bug)
    assert cli("devices") == InternalError.exit_code == 3
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "in bug" in err
    assert "edgekit devices: error: the planner placed two live tensors at one offset" in err
    assert "this is a bug in edgekit: please report it with the traceback above" in err
