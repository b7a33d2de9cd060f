"""Progress bars for long CLI work (rich), silent when stderr is not a terminal."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

ProgressFactory = Callable[[str, int], Callable[[int], None]]


@contextmanager
def progress_bars(enabled: bool) -> Iterator[Callable[[str, int], Callable[[int], None]]]:
    if not enabled:
        yield lambda label, total: (lambda n: None)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=False) as bars:
        def factory(label: str, total: int) -> Callable[[int], None]:
            task = bars.add_task(label, total=total)
            return lambda n: bars.advance(task, n)

        yield factory
