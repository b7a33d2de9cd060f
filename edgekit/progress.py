"""Progress bars for long CLI work (rich), silent when stderr is not a terminal.

The library never draws: it reports long steps through ``step_progress(label, total) -> advance(n)``, which does
nothing unless a CLI command is inside ``progress_bars`` (then the step gets a bar in the same display)."""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator, Optional

ProgressFactory = Callable[[str, int], Callable[[int], None]]

_ACTIVE: ContextVar[Optional[ProgressFactory]] = ContextVar("edgekit_progress", default=None)


def _no_progress(n: int) -> None:
    return None


def step_progress(label: str, total: int) -> Callable[[int], None]:
    """For library code: ``advance = step_progress("building firmware", 12)``, then ``advance(1)`` per step done.
    A no-op outside the CLI's progress display."""
    factory = _ACTIVE.get()
    return factory(label, max(1, total)) if factory is not None else _no_progress


@contextmanager
def reporting_to(factory: ProgressFactory) -> Iterator[ProgressFactory]:
    """Inside the block, library steps (step_progress) report to ``factory``."""
    token = _ACTIVE.set(factory)
    try:
        yield factory
    finally:
        _ACTIVE.reset(token)


@contextmanager
def progress_bars(enabled: bool) -> Iterator[ProgressFactory]:
    """A progress factory for the CLI; library steps (step_progress) inside the block draw in the same display.
    Nested blocks reuse the outer display (rich allows one live display at a time)."""
    outer = _ACTIVE.get()
    if outer is not None:
        yield outer if enabled else (lambda label, total: _no_progress)
        return
    if not enabled:
        yield lambda label, total: _no_progress
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=False) as bars:
        def factory(label: str, total: int) -> Callable[[int], None]:
            task = bars.add_task(label, total=total)
            return lambda n: bars.advance(task, n)

        with reporting_to(factory):
            yield factory
