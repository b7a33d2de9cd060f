"""A figure that says how it was obtained: ``measured`` / ``estimated`` (with the source) or ``unavailable``."""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import ConfigDict, model_validator

from edgekit.results.base import Section

Method = Literal["measured", "estimated", "unavailable"]


class Figure(Section):
    """value + unit + method + source. Measured and estimated figures need a value and a source; an unavailable
    one has no value and says why in ``reason``. Extra keys (cycles, clock_hz, per-window details...) are kept as
    further facts of the figure, flat beside these."""

    model_config = ConfigDict(frozen=True, extra="allow", json_schema_extra={
        "description": "a figure that says how it was obtained",
        "if": {"properties": {"method": {"enum": ["measured", "estimated"]}}},
        "then": {"required": ["source"], "properties": {"source": {"type": "string"}}}})

    value: Optional[float]
    method: Method
    unit: Optional[str] = None
    source: Optional[str] = None
    reason: Optional[str] = None

    @model_validator(mode="after")
    def _says_how(self) -> "Figure":
        if self.method == "unavailable":
            if self.value is not None:
                raise ValueError("an unavailable figure has no value")
        else:
            if self.value is None:
                raise ValueError(f"a {self.method} figure needs a value")
            if not self.source:
                raise ValueError(f"a {self.method} figure needs its source")
        return self

    def to_dict(self) -> dict:
        data = self.model_dump(mode="json")
        return {k: v for k, v in data.items() if v is not None or k in ("value", "source")}


def measured(value: float, unit: str, source: str, **details: Any) -> Figure:
    return Figure(value=float(value), unit=unit, method="measured", source=source, **details)


def estimated(value: float, unit: str, source: str, **details: Any) -> Figure:
    return Figure(value=float(value), unit=unit, method="estimated", source=source, **details)


def unavailable(reason: str, unit: Optional[str] = None, **details: Any) -> Figure:
    return Figure(value=None, unit=unit, method="unavailable", source=None, reason=reason, **details)
