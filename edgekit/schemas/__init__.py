"""Versioned JSON: every JSON file edgekit writes carries ``"schema": "edgekit.<name>/<version>"`` and has a
JSON Schema (Draft 2020-12) in this folder, ``<name>.json``, shipped as package data.

The schemas of typed results (``edgekit.schemas.generate.TYPED``) are generated from their types; the others are
still written by hand from the files the commands write.
Stability promise: additive changes (a new optional key) keep the version; removing or renaming a key, changing
its type or meaning, or making a key required bumps it.
"""
from __future__ import annotations

import json
from importlib.resources import files
from typing import Any, Callable, Dict, Mapping, Optional

from edgekit.errors import UnknownNameError
from edgekit.results.base import JsonObject

# name -> current version; the schema of each is <name>.json beside this file
VERSIONS: Dict[str, int] = {
    "parity": 1,             # parity.json of `edgekit quantize` / `edgekit parity` (and deploy's quantize/)
    "preprocess-parity": 1,  # parity.json of `edgekit preprocess-parity`
    "calib-check": 1,        # calib_check.json of `edgekit calib-check`
    "layers": 1,             # layers.json of --debug / --per-layer
    "manifest": 1,           # manifest.json of every command
    "firmware": 1,           # firmware.json of `edgekit firmware` (edgekit, tflm and ethos-u runtimes)
    "firmware-library": 1,   # library.json of `edgekit firmware --emit library`
    "run": 1,                # run.json of `edgekit run`
    "mlperf-run": 1,         # run.json of `edgekit run --harness mlperf-tiny`
    "deploy": 1,             # deploy.json of `edgekit deploy`
    "compile": 1,            # compile.json of `edgekit compile`
    "pipeline": 1,           # pipeline.json of `edgekit run --pipeline`
    "gpu-placement": 1,      # gpu.json of `edgekit compile --target gpu`
    "coreml-placement": 1,   # coreml_placement.json of `edgekit compile --target ane`
    "mlperf-dataset": 1,     # dataset.json of `edgekit mlperf-dataset`
    "lab": 1,                # table.json of `edgekit lab`
}


def schema_id(name: str) -> str:
    """``edgekit.<name>/<version>`` for a known schema name."""
    if name not in VERSIONS:
        raise UnknownNameError("JSON schema", name, VERSIONS)
    return f"edgekit.{name}/{VERSIONS[name]}"


def stamped(name: str, data: Mapping[str, Any]) -> JsonObject:
    """``data`` with ``"schema"`` as its first key (the caller's dict is not changed)."""
    return {"schema": schema_id(name), **{k: v for k, v in data.items() if k != "schema"}}


def dumps(name: str, data: Mapping[str, Any], *, default: Optional[Callable[[Any], Any]] = None) -> str:
    """The text of a stamped JSON file: indented, with a final newline (``default`` as for json.dumps)."""
    return json.dumps(stamped(name, data), indent=2, default=default) + "\n"


def schema_text(name: str) -> str:
    schema_id(name)  # refuses unknown names with the list of valid ones
    return (files(__name__) / f"{name}.json").read_text(encoding="utf-8")


def load_schema(name: str) -> JsonObject:
    return json.loads(schema_text(name))


def name_of(schema: str) -> str:
    """``edgekit.run/1`` -> ``run`` (the schema file to validate it with)."""
    return schema.split("/", 1)[0].removeprefix("edgekit.")
