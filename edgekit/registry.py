"""Named registries for extension points (converters, calibration methods, runners...)."""
from __future__ import annotations

from typing import Callable, Dict, Generic, Iterator, TypeVar

from edgekit.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """A name -> object map filled by an explicit ``@registry.register("name")``."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: Dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._items[name] = obj
            return obj

        return decorator

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._items) from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))
