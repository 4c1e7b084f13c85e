"""A least-recently-used memo bounded by an estimate of the bytes it holds: :class:`Memo`. The build
cache keeps its serialised builds in one (:mod:`.build_cache`, sized by their length); the pipeline its
memos below.

The pipeline remembers, per artifact, where ``spec.path`` leads and what a build can reach
(:mod:`.pipeline`). Every Kustomization is reconciled in turn, so the entries are used round-robin: a
memo that holds fewer entries than there are Kustomizations misses on *every* lookup (each entry is
evicted just before its turn comes again). A fixed count of 4,096 made every periodic reconcile of
10,000 Kustomizations walk and hash its files again (issue 27). Bounding the bytes instead keeps every
entry of a small one (a few hundred bytes each) up to the budget, and only big ones are crowded out.

``size`` is the caller's estimate of an entry's bytes (strings and lists of strings: their lengths plus
a fixed overhead, :func:`estimate`); an entry larger than the whole budget is not kept.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

ENTRY_OVERHEAD = 200  # the entry's own objects: the key tuple, the dict slot, the value's object
ITEM_OVERHEAD = 60  # one string object (header, hash) or list slot


def estimate(*parts: str | Iterable[str]) -> int:
    """Bytes of an entry made of these strings and lists of strings, roughly (CPython's compact str)."""
    total = ENTRY_OVERHEAD
    for part in parts:
        if isinstance(part, str):
            total += ITEM_OVERHEAD + len(part)
        else:
            total += sum(ITEM_OVERHEAD + len(s) for s in part)
    return total


class Memo(Generic[K, V]):
    """``get``/``put`` with least-recently-used eviction once the estimated bytes exceed ``max_bytes``."""

    def __init__(self, *, max_bytes: int, size: Callable[[K, V], int]) -> None:
        self._max_bytes = max_bytes
        self._size = size
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def values(self) -> Iterator[V]:
        """The values kept, least recently used first (no lookup: the order is left as it is)."""
        return (value for value, _ in self._entries.values())

    def get(self, key: K) -> V | None:
        found = self._entries.get(key)
        if found is None:
            return None
        self._entries.move_to_end(key)
        return found[0]

    def put(self, key: K, value: V) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        size = self._size(key, value)
        if size > self._max_bytes:
            return
        self._entries[key] = (value, size)
        self.bytes += size
        while self.bytes > self._max_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.bytes -= dropped
