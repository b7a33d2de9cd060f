"""Files the user writes (MATRIX.yaml, PIPELINE.yaml): one declared schema each, every problem with file:line.

A schema is a ``ConfigSection`` (pydantic, like the typed results in ``edgekit.results``, but strict: a YAML
``5`` is not a string, ``abc`` is not a number, ``topk`` is not a list, and unknown keys are refused).
``load_yaml`` keeps the line of every key and list item; ``validate`` checks the data against the schema and
raises ONE ``UserError`` listing every problem as ``FILE:LINE: where: what``. ``Problems`` collects the checks
that come after the schema (files that must exist, names) with the same line numbers.
"""
from __future__ import annotations

import typing
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Type, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from edgekit.errors import UserError

Loc = Tuple[Any, ...]  # a place in the document: ("boards", 2, "instances")
S = TypeVar("S", bound="ConfigSection")


class ConfigSection(BaseModel):
    """A part of a user-written file: strict types, unknown keys refused, frozen once read."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


def _lines(node: Any, loc: Loc, out: Dict[Loc, int]) -> None:
    """The line of every key (``loc + (key,)``) and list item (``loc + (index,)``) under ``node``."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else str(key)
            out[loc + (name,)] = key.start_mark.line + 1
            _lines(value, loc + (name,), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out[loc + (i,)] = item.start_mark.line + 1
            _lines(item, loc + (i,), out)


class Document:
    """A parsed YAML file: ``data`` and the line of every place in it."""

    def __init__(self, path: Path, data: Any, lines: Dict[Loc, int]) -> None:
        self.path, self.data, self.lines = Path(path), data, lines

    def line(self, loc: Loc) -> int:
        """The line of ``loc``, or of the nearest enclosing place that has one (1 for the document)."""
        loc = tuple(loc)
        while loc and loc not in self.lines:
            loc = loc[:-1]
        return self.lines.get(loc, 1)

    def where(self, loc: Loc) -> str:
        return f"{self.path}:{self.line(loc)}"


def load_yaml(path: Path, what: str) -> Document:
    """Read ``path`` as YAML (``what``: "matrix file", "pipeline file" for the messages)."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError:
        raise UserError(f"{what} {path} is not a text file") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise UserError(f"{at}: {what} is not valid YAML: {problem}", fix=f"correct the YAML syntax of {path}") from None
    lines: Dict[Loc, int] = {}
    if node is not None:
        _lines(node, (), lines)
    return Document(path, data, lines)


def _place(loc: Loc) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "the file"


def _message(error: Dict[str, Any]) -> str:
    kind, msg, value = error["type"], error["msg"], error.get("input")
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "missing (required)"
    if kind in ("model_type", "dict_type"):
        return f"should be a mapping of keys (KEY: VALUE lines, or {{KEY: VALUE}}), not {value!r}"
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{msg[0].lower() + msg[1:]} (got {shown})"


class Problems:
    """Problems of one document, each ``FILE:LINE: place: what``; ``raise_if_any`` raises one UserError."""

    def __init__(self, doc: Document, what: str) -> None:
        self.doc, self.what = doc, what
        self.items: List[Tuple[int, str]] = []

    def add(self, loc: Loc, text: str) -> None:
        self.items.append((self.doc.line(loc), f"{self.doc.where(loc)}: {_place(loc)}: {text}"))

    def add_validation(self, exc: ValidationError, schema: Optional[type] = None) -> None:
        for error in exc.errors():
            loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and p in _UNION_TAGS))
            text = _message(error)
            if error["type"] == "extra_forbidden" and schema is not None:
                keys = _keys_at(schema, loc[:-1])
                text = f"unknown key {loc[-1]!r}" + (f"; valid keys: {', '.join(keys)}" if keys else "")
            self.add(loc, text)

    def raise_if_any(self, fix: str) -> None:
        if not self.items:
            return
        ordered = [text for _, text in sorted(self.items, key=lambda item: item[0])]
        head = f"{len(ordered)} problem(s) in {self.what} {self.doc.path}:" if len(ordered) > 1 else ""
        message = (head + "\n" + "\n".join(f"  - {t}" for t in ordered)) if head else ordered[0]
        raise UserError(message, fix=fix)


# pydantic names the member of a union in an error's loc ("str", "dict[str,any]"): not a place in the file
_UNION_TAGS = {"str", "int", "float", "bool", "dict[str,any]", "list[str]", "function-after[_check(), str]"}


def validate(schema: Type[S], doc: Document, problems: Problems) -> S | None:
    """``doc.data`` as ``schema``; every schema problem goes to ``problems`` (None then)."""
    data = doc.data
    if not isinstance(data, dict):
        problems.add((), f"must be a mapping of keys ({', '.join(schema.model_fields)}), not {type(data).__name__}")
        return None
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        problems.add_validation(exc, schema)
        return None


def _section_type(annotation: Any) -> Optional[type]:
    """The ConfigSection inside an annotation (Optional[X], List[X], Union[...]), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _section_type(arg)
        if found is not None:
            return found
    return None


def _keys_at(schema: type, loc: Loc) -> List[str]:
    """The keys the schema allows at ``loc`` (list indexes skipped), [] when it is not a section."""
    current: Optional[type] = schema
    for part in loc:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(part) if current is not None else None
        current = _section_type(field.annotation) if field is not None else None
    return list(current.model_fields) if current is not None else []
