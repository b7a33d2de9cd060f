"""``Number``: a float field that may be non-finite (SQNR of identical outputs is inf); JSON has no inf/NaN literal,
so it is written as the string "inf", "-inf" or "nan" (as ``edgekit.report.json_safe`` does for dicts)."""
from __future__ import annotations

import math
from typing import Literal, Union

from pydantic import PlainSerializer
from typing_extensions import Annotated

NonFinite = Literal["inf", "-inf", "nan"]


def _json_number(value: float) -> Union[float, str]:
    value = float(value)
    if math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


Number = Annotated[float, PlainSerializer(_json_number, return_type=Union[float, NonFinite], when_used="json")]
