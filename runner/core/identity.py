"""Values derived from an object, remembered by that object's identity.

A registry that caches plans hands back the very same dict on every run while the plan
is current (registry/plan_cache.py). What the runner derives from it (the typed Plan, a
compiled parameter validator) can then be found by `id()` instead of by hashing or
serialising the dict again. Each entry keeps its object alive, so an id cannot be
reused for another object while its entry exists; the objects must be treated as
read-only, as cached plans already are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class ByIdentity(Generic[V]):
    def __init__(self, make: Callable[[Any], V], max_size: int = 1024) -> None:
        self._make = make
        self._max_size = max_size
        self._kept: dict[int, tuple[Any, V]] = {}

    def __call__(self, obj: Any) -> V:
        kept = self._kept.get(id(obj))
        if kept is not None and kept[0] is obj:
            return kept[1]
        value = self._make(obj)
        if len(self._kept) >= self._max_size:
            self._kept.clear()
        self._kept[id(obj)] = (obj, value)
        return value
