"""Versioned JSON: every schema is a valid Draft 2020-12 schema, `edgekit schema` prints them, and the files the
commands write carry their stamp and validate (the conftest fixture json_files_match_their_schemas checks every
stamped file any test leaves in its tmp_path)."""
from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from edgekit import schemas
from edgekit.errors import UnknownNameError
from tests.schema_check import check_file, check_tree


@pytest.mark.parametrize("name", sorted(schemas.VERSIONS))
def test_every_schema_is_valid_and_pins_its_stamp(name):
    schema = schemas.load_schema(name)
    Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema"] == {"const": schemas.schema_id(name)}
    assert "schema" in schema["required"] and schema["title"] == schemas.schema_id(name)


def test_stamp_comes_first_and_leaves_the_input_alone():
    data = {"passed": True, "schema": "stale"}
    text = schemas.dumps("deploy", data)
    assert text.startswith('{\n  "schema": "edgekit.deploy/1",') and text.endswith("}\n")
    assert json.loads(text) == {"schema": "edgekit.deploy/1", "passed": True}
    assert data == {"passed": True, "schema": "stale"}
    with pytest.raises(UnknownNameError, match="unknown JSON schema .runs.; valid choices: calib-check, compile, "):
        schemas.schema_id("runs")


def test_schema_command_prints_and_lists(cli, capsys):
    assert cli("schema", "run") == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == schemas.load_schema("run")
    assert cli("schema") == 0
    assert capsys.readouterr().out.split() == [schemas.schema_id(n) for n in schemas.VERSIONS]
    assert cli("schema", "nope") == 2
    assert "unknown JSON schema 'nope'; valid choices:" in capsys.readouterr().err


def test_a_file_that_breaks_its_schema_is_reported(tmp_path):
    good = tmp_path / "run.json"
    good.write_text(schemas.dumps("mlperf-run", {"harness": "mlperf-tiny", "mode": "performance"}))
    stamp, problems = check_file(good)
    assert stamp == "edgekit.mlperf-run/1" and any("'task' is a required property" in p for p in problems)
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"schema": "edgekit.run/0"}))
    assert check_file(old)[1] == ["stamped edgekit.run/0, but the current schema is edgekit.run/1"]
    unstamped = tmp_path / "other.json"
    unstamped.write_text("{}")
    assert check_file(unstamped) == ("", [])
    for path in (good, old):  # leave nothing invalid behind for the conftest check of this tmp_path
        path.unlink()


def _at(schema: dict, *keys: str) -> dict:
    """The sub-schema at properties[k1].properties[k2]..., following local $refs (generated schemas use $defs)."""
    node = schema
    for key in keys:
        while "$ref" in node:
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
        node = node["properties"][key]
    while "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def test_figures_need_their_method_and_source():
    validator = Draft202012Validator(schemas.load_schema("deploy"))
    figure = _at(schemas.load_schema("deploy"), "estimates", "energy_uj")
    sub = Draft202012Validator(figure)
    assert sub.is_valid({"value": 230.0, "unit": "uJ", "method": "estimated", "source": "profile power_model"})
    assert sub.is_valid({"value": None, "method": "unavailable"})
    assert not sub.is_valid({"value": 230.0, "unit": "uJ", "method": "estimated"})  # no source
    assert not sub.is_valid({"value": 230.0, "unit": "uJ", "method": "guessed", "source": "x"})
    assert not validator.is_valid({"schema": "edgekit.deploy/1"})


def test_quantize_writes_stamped_json_that_validates(cli, tmp_path, demo_float_tflite, digits_arrays):
    import numpy as np

    calib = tmp_path / "calib.npy"
    np.save(calib, digits_arrays[0][:24])
    out = tmp_path / "q"
    assert cli("quantize", demo_float_tflite, "--calib", calib, "--calib-size", "16", "-o", out) in (0, 1)
    for name, stamp in (("parity.json", "edgekit.parity/1"), ("manifest.json", "edgekit.manifest/1")):
        assert json.loads((out / name).read_text())["schema"] == stamp
    checked, problems = check_tree(out)
    assert len(checked) == 2 and not problems, problems


def test_generated_schemas_match_their_types():
    from edgekit.schemas import generate

    assert set(generate.TYPED) <= set(schemas.VERSIONS)
    assert generate.stale(sorted(generate.TYPED)) == [], "run: python -m edgekit.schemas.generate"


def test_figure_type_cannot_exist_without_method_and_source():
    from pydantic import ValidationError

    from edgekit.results import Figure, estimated, unavailable

    assert estimated(230.0, "uJ", "profile power_model", cycles=12.0).to_dict() == {
        "value": 230.0, "method": "estimated", "unit": "uJ", "source": "profile power_model", "cycles": 12.0}
    assert unavailable("no power monitor").to_dict() == {"value": None, "method": "unavailable", "source": None,
                                                          "reason": "no power monitor"}
    with pytest.raises(ValidationError, match="needs its source"):
        Figure(value=1.0, unit="uJ", method="measured")
    with pytest.raises(ValidationError, match="needs a value"):
        Figure(value=None, method="estimated", source="x")
    with pytest.raises(ValidationError):
        Figure(value=1.0, method="guessed", source="x")
    figure = estimated(1.0, "ms", "model")
    with pytest.raises(ValidationError):
        figure.value = 2.0  # frozen
    sub = Draft202012Validator(Figure.model_json_schema())
    assert sub.is_valid({"value": None, "method": "unavailable"})
    assert not sub.is_valid({"value": 230.0, "unit": "uJ", "method": "estimated"})
