"""`edgekit schema [NAME]`: print the JSON Schema of one of the JSON files edgekit writes (or list them)."""
from __future__ import annotations

import sys
from typing import Callable, Dict


def register(subparsers) -> Dict[str, Callable]:
    s = subparsers.add_parser("schema", help="print the JSON Schema of a JSON file edgekit writes (run.json, ...)")
    s.add_argument("name", nargs="?", help="schema name, e.g. run, parity, firmware (omit to list them)")
    return {"schema": cmd_schema}


def cmd_schema(args) -> int:
    from edgekit import schemas

    if args.name is None:
        for name in schemas.VERSIONS:
            print(schemas.schema_id(name))
        return 0
    sys.stdout.write(schemas.schema_text(args.name))
    return 0
