"""Generate the JSON Schemas of typed results (``edgekit.results.Result`` subclasses) into ``edgekit/schemas/``.

    python -m edgekit.schemas.generate          # rewrite the generated schema files (and docs/schemas/*.md)
    python -m edgekit.schemas.generate --check  # exit 1 naming every file that is out of date

``TYPED`` maps a schema name to the result type that writes it; the other names in ``VERSIONS`` still have
hand-written schemas. A test checks that every generated file in the package equals what its type generates.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Type

from edgekit.results import JsonObject
from edgekit.schemas import VERSIONS, schema_id

# schema name -> "module:Class" of the Result subclass that writes it
TYPED: Dict[str, str] = {
    "calib-check": "edgekit.preprocessing.calib_result:CalibCheckFile",
    "compile": "edgekit.compile.result:CompileReport",
    "coreml-placement": "edgekit.mobile.placement:CoremlPlacement",
    "deploy": "edgekit.firmware.results:DeployReport",
    "firmware": "edgekit.firmware.results:FirmwareInfo",
    "firmware-library": "edgekit.firmware.library_results:LibraryInfo",
    "gpu-placement": "edgekit.mobile.placement:GpuPlacement",
    "lab": "edgekit.lab.results:LabTable",
    "layers": "edgekit.parity.layers_result:LayersFile",
    "manifest": "edgekit.artifact:ManifestFile",
    "mlperf-dataset": "edgekit.run.mlperf.dataset:DatasetInfo",
    "mlperf-run": "edgekit.run.mlperf.results:MlperfRun",
    "parity": "edgekit.parity.result:ParityReport",
    "pipeline": "edgekit.run.pipeline.results:PipelineReport",
    "preprocess-parity": "edgekit.preprocessing.parity_result:PreprocessParityFile",
    "run": "edgekit.run.results:RunReport",
}

HERE = Path(__file__).resolve().parent


def result_type(name: str) -> Type[Any]:
    module, _, cls = TYPED[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def generate(name: str) -> JsonObject:
    """The Draft 2020-12 schema of one typed result, with its stamp pinned as the ``schema`` property."""
    typ = result_type(name)
    if getattr(typ, "SCHEMA", None) != name:
        raise ValueError(f"{TYPED[name]} declares SCHEMA={getattr(typ, 'SCHEMA', None)!r}, not {name!r}")
    body = typ.model_json_schema(mode="serialization")
    stamp = schema_id(name)
    properties = {"schema": {"const": stamp}, **body.pop("properties", {})}
    required = ["schema", *[r for r in body.pop("required", []) if r != "schema"]]
    body.pop("title", None)
    description = body.pop("description", (typ.__doc__ or "").strip().split("\n\n")[0].replace("\n", " "))
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": stamp, "description": description,
            "type": "object", "required": required, "properties": properties, **body}


def text_of(name: str) -> str:
    return json.dumps(generate(name), indent=2) + "\n"


def stale(names: List[str]) -> List[str]:
    """The names whose committed schema file differs from the generated one."""
    return [n for n in names if (HERE / f"{n}.json").read_text(encoding="utf-8") != text_of(n)]


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 when a file is out of date")
    args = parser.parse_args(argv)
    unknown = sorted(set(TYPED) - set(VERSIONS))
    if unknown:
        print(f"typed schemas without a version in edgekit.schemas.VERSIONS: {', '.join(unknown)}", file=sys.stderr)
        return 1
    if args.check:
        out_of_date = stale(sorted(TYPED))
        for name in out_of_date:
            print(f"edgekit/schemas/{name}.json is out of date: run python -m edgekit.schemas.generate",
                  file=sys.stderr)
        return 1 if out_of_date else 0
    for name in sorted(TYPED):
        (HERE / f"{name}.json").write_text(text_of(name), encoding="utf-8")
        print(f"wrote edgekit/schemas/{name}.json ({TYPED[name]})")
    from edgekit.schemas import docs  # the documentation pages rendered from these files, kept in step

    if docs.DOCS.parent.is_dir():  # a checkout (an installed package has no docs/)
        docs.main([])
    return 0


if __name__ == "__main__":
    sys.exit(main())
