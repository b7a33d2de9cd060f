"""``Sparse``: a frozen section whose absent (None) fields are left out of its JSON (readings, windows, signals:
a device reports the figures it has; a key it cannot report is missing, not null)."""
from __future__ import annotations

from pydantic import SerializationInfo, SerializerFunctionWrapHandler, model_serializer

from edgekit.results import Section


class Sparse(Section):
    """A section of optional facts: a field left at None is not written."""

    @model_serializer(mode="wrap")
    def _without_absent(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo):
        return {key: value for key, value in handler(self).items() if value is not None}
