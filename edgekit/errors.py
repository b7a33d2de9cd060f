"""Error hierarchy: user errors get one clear message from the CLI, internal errors a traceback."""
from __future__ import annotations

from typing import Iterable, Optional, Sequence


class EdgekitError(Exception):
    """Base of every error edgekit raises on purpose."""

    exit_code = 2

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return self.message if not self.fix else f"{self.message}\nFix: {self.fix}"


class UserError(EdgekitError):
    """Something the user gave us is wrong: bad file, bad option, bad data."""


class InvalidModelError(UserError):
    """A model file is missing, truncated, corrupt or of an unknown kind."""


class CalibrationDataError(UserError):
    """Calibration or evaluation data cannot be used with this model."""

    def __init__(self, problems: Sequence[str] | str, *, fix: str | None = None) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        if len(self.problems) == 1:
            message = self.problems[0]
        else:
            message = f"{len(self.problems)} problems with the data:\n" + "\n".join(
                f"  - {p}" for p in self.problems
            )
        super().__init__(message, fix=fix)


class UnsupportedOpError(UserError):
    """The model has operators the target cannot run; carries the whole support report."""

    def __init__(self, report: "object", *, target: str) -> None:
        self.report = report
        rejected = list(getattr(report, "rejected", []))
        lines = "\n".join(f"  - {op.describe()}" for op in rejected)
        super().__init__(
            f"{len(rejected)} operator(s) cannot be converted to {target}:\n{lines}",
            fix="replace these layers with supported ones (see the list above) or choose another --format",
        )


class UnknownNameError(UserError):
    """A name (method, converter, device...) that is not registered."""

    def __init__(self, kind: str, name: str, valid: Iterable[str]) -> None:
        self.valid = sorted(valid)
        super().__init__(f"unknown {kind} {name!r}; valid choices: {', '.join(self.valid)}")


class DoesNotFitError(UserError):
    """A model does not fit the memory of the target board."""


class DeviceNotFoundError(UserError):
    """A device is unknown or unreachable."""


class ToolMissingError(UserError):
    """An optional dependency or external tool is not installed."""

    def __init__(self, tool: str, install: str) -> None:
        super().__init__(f"{tool} is not installed", fix=install)


class ConversionError(UserError):
    """A converter failed on a model for a reason it reported."""


class InternalError(EdgekitError):
    """A bug in edgekit: the CLI prints its traceback (always, not only with -v) and asks for a report."""

    exit_code = 3


class DeviceError(EdgekitError):
    """A device hung, disconnected, timed out or sent a garbled reply; results so far are kept."""

    exit_code = 4
    partial: Optional[object] = None  # the RunResult measured before the failure, when a runner has one


def first_line(exc: BaseException, limit: Optional[int] = 300) -> str:
    """The first line of an exception's message for a user-facing error (the type name if the message is empty)."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    return text if limit is None else text[:limit]
