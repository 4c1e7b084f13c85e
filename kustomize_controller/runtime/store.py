"""The informer's cache: objects by key, plus named indexes (client-go ``cache.Indexer``).

Contract:
- Keys are ``namespace/name``, or ``name`` for cluster-scoped objects (``object_key``).
- ``upsert``/``delete``/``replace`` keep every index consistent with the stored objects; an index
  function returns the index values of an object (a list: one object can sit under several values).
- ``replace(objects)`` swaps the whole content and returns what changed, so the informer can send
  add/update/delete notifications (deletes for keys that vanished carry the last known object).
- Objects are stored as given, not copied: readers must treat them as read-only.
  ``namespace`` is always indexed (``NAMESPACE_INDEX``).

Not promised: ordering of ``list()``; thread safety (one event loop).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
IndexFunc = Callable[[Mapping[str, Any]], Iterable[str]]

NAMESPACE_INDEX = "namespace"


def object_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)


def split_key(key: str) -> tuple[str | None, str]:
    """``ns/name`` → ``("ns", "name")``; ``name`` → ``(None, "name")``."""
    namespace, sep, name = key.partition("/")
    return (namespace, name) if sep else (None, key)


def resource_version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def namespace_index(obj: Mapping[str, Any]) -> list[str]:
    return [str((obj.get("metadata") or {}).get("namespace") or "")]


@dataclass(frozen=True)
class ReplaceResult:
    added: list[Obj]
    updated: list[tuple[Obj, Obj]]  # (old, new), only when the resourceVersion changed
    unchanged: list[Obj]
    deleted: list[tuple[str, Obj]]  # (key, last known object)


class Store:
    def __init__(self) -> None:
        self._items: dict[str, Obj] = {}
        self._index_funcs: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, set[str]]] = {}
        self.add_indexer(NAMESPACE_INDEX, namespace_index)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def add_indexer(self, name: str, func: IndexFunc) -> None:
        """Register an index; existing objects are indexed at once. Re-registering a name fails."""
        if name in self._index_funcs:
            raise ValueError(f"index {name!r} already exists")
        self._index_funcs[name] = func
        self._indices[name] = {}
        for key, obj in self._items.items():
            self._index_one(name, key, obj)

    def get(self, key: str) -> Obj | None:
        return self._items.get(key)

    def keys(self) -> builtins.list[str]:
        return list(self._items)

    def list(self) -> builtins.list[Obj]:
        return list(self._items.values())

    def by_index(self, index: str, value: str) -> builtins.list[Obj]:
        keys = self._indices[index].get(value, ())
        return [self._items[k] for k in keys]

    def index_keys(self, index: str, value: str) -> builtins.list[str]:
        return sorted(self._indices[index].get(value, ()))

    def upsert(self, obj: Obj) -> Obj | None:
        """Store ``obj``; return the object it replaced, if any."""
        key = object_key(obj)
        old = self._items.get(key)
        if old is not None:
            self._unindex(key, old)
        self._items[key] = obj
        for name in self._index_funcs:
            self._index_one(name, key, obj)
        return old

    def delete(self, key: str) -> Obj | None:
        old = self._items.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def replace(self, objects: Iterable[Obj]) -> ReplaceResult:
        added: builtins.list[Obj] = []
        updated: builtins.list[tuple[Obj, Obj]] = []
        unchanged: builtins.list[Obj] = []
        seen: set[str] = set()
        for obj in objects:
            key = object_key(obj)
            seen.add(key)
            old = self.upsert(obj)
            if old is None:
                added.append(obj)
            elif resource_version(old) != resource_version(obj) or not resource_version(obj):
                updated.append((old, obj))
            else:
                unchanged.append(obj)
        deleted: builtins.list[tuple[str, Obj]] = []
        for key in [k for k in self._items if k not in seen]:
            last = self.delete(key)
            if last is not None:
                deleted.append((key, last))
        return ReplaceResult(added=added, updated=updated, unchanged=unchanged, deleted=deleted)

    def _index_one(self, name: str, key: str, obj: Obj) -> None:
        index = self._indices[name]
        for value in self._index_funcs[name](obj):
            index.setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: Obj) -> None:
        for name, func in self._index_funcs.items():
            index = self._indices[name]
            for value in func(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
