"""Validate the JSON files edgekit wrote against their schemas (edgekit/schemas/), with the jsonschema package."""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import List, Tuple

STAMP = re.compile(rb'^\s*\{\s*"schema":\s*"(edgekit\.[\w-]+/\d+)"')


@lru_cache(maxsize=None)
def validator(name: str):
    from jsonschema import Draft202012Validator

    from edgekit.schemas import load_schema

    schema = load_schema(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def check_file(path: Path) -> Tuple[str, List[str]]:
    """(schema id, problems) of one stamped file; ("", []) when the file carries no edgekit stamp."""
    from edgekit.schemas import name_of, schema_id

    with open(path, "rb") as handle:
        head = handle.read(200)
    match = STAMP.match(head)
    if not match:
        return "", []
    stamp = match.group(1).decode()
    name = name_of(stamp)
    try:
        current = schema_id(name)
    except Exception as exc:  # an unknown name
        return stamp, [str(exc)]
    if stamp != current:
        return stamp, [f"stamped {stamp}, but the current schema is {current}"]
    try:
        data = json.loads(path.read_text())
    except ValueError:  # a test truncated or garbled the file on purpose (edgekit verify's tests)
        return stamp, []
    problems = [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:300]}"
                for e in validator(name).iter_errors(data)]
    return stamp, problems


def check_tree(folder: Path) -> Tuple[List[str], List[str]]:
    """(stamped files checked, problems) for every *.json under ``folder``."""
    checked, problems = [], []
    for path in sorted(Path(folder).rglob("*.json")):
        if not path.is_file():
            continue
        stamp, found = check_file(path)
        if stamp:
            checked.append(f"{path} ({stamp})")
        problems += [f"{path} ({stamp}): {p}" for p in found]
    return checked, problems
