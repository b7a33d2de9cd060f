"""SupportReport: every operator of a model, accepted or rejected for a target with a reason."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional


@dataclass(frozen=True)
class OpSupport:
    op: str
    location: str  # e.g. "op #3 -> tensor 'conv1/Relu'"
    supported: bool
    reason: str = ""

    def describe(self) -> str:
        text = f"{self.op} at {self.location}"
        return f"{text}: {self.reason}" if self.reason else text


@dataclass
class SupportReport:
    target: str
    ops: List[OpSupport] = field(default_factory=list)

    @property
    def rejected(self) -> List[OpSupport]:
        return [o for o in self.ops if not o.supported]

    @property
    def ok(self) -> bool:
        return not self.rejected

    def merge(self, other: "SupportReport") -> "SupportReport":
        """Keep our entries, add the other's rejections that we do not already list."""
        known = {(o.op, o.location) for o in self.rejected}
        extra = [o for o in other.rejected if (o.op, o.location) not in known]
        return SupportReport(self.target, self.ops + extra)

    def to_json(self) -> dict:
        return {
            "target": self.target,
            "supported": self.ok,
            "ops": [o.__dict__ for o in self.ops],
        }

    def find(self, op: str) -> Optional[OpSupport]:
        return next((o for o in self.ops if o.op == op), None)
