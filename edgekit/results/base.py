"""The base classes of typed results: ``Section`` (a frozen part of a result) and ``Result`` (a whole JSON file)."""
from __future__ import annotations

import json
from typing import Any, ClassVar, Dict

from pydantic import BaseModel, ConfigDict

JsonObject = Dict[str, Any]  # a JSON document as plain data (what json.dumps takes); the typed form is the Result


class Section(BaseModel):
    """A frozen, typed part of a result. Unknown fields are refused, so a mistyped name fails at construction."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    def to_dict(self) -> JsonObject:
        """Plain JSON-able data (numbers, strings, lists, dicts): every field, defaults included."""
        return self.model_dump(mode="json", exclude_unset=False, by_alias=True)

    def present(self) -> JsonObject:
        """Only the fields that were given (a runner fills the figures its device reports)."""
        return self.model_dump(mode="json", exclude_unset=True)


class Result(Section):
    """A whole JSON document edgekit writes; ``SCHEMA`` names its schema in ``edgekit.schemas.VERSIONS``."""

    SCHEMA: ClassVar[str] = ""

    def to_json(self) -> JsonObject:
        """The stamped document: ``{"schema": "edgekit.<name>/<version>", ...fields}``."""
        from edgekit.schemas import stamped

        return stamped(self.SCHEMA, self.to_dict())

    def dumps(self) -> str:
        """The text of the stamped file (indented, final newline), as ``edgekit.schemas.dumps`` writes it."""
        return json.dumps(self.to_json(), indent=2) + "\n"
