"""Typed, frozen stage results that serialise themselves to the versioned JSON edgekit writes.

Every stage hands the next one a ``Result`` (a frozen pydantic model), never a dict read by string keys: a mistyped
field is an error at construction, not a silent ``None``. ``Result.to_json()`` gives the stamped JSON document
(``"schema": "edgekit.<name>/<version>"`` first) and the JSON Schema under ``edgekit/schemas/`` is generated from
the type (``python -m edgekit.schemas.generate``). ``Figure`` is an energy / latency / cycle figure that cannot
exist without its method (measured, estimated, unavailable) and, unless unavailable, its source.
"""
from edgekit.results.base import JsonObject, Result, Section
from edgekit.results.figure import Figure, Method, estimated, measured, unavailable

__all__ = ["JsonObject", "Result", "Section", "Figure", "Method", "measured", "estimated", "unavailable"]
