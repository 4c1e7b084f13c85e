"""Object storage: one global resourceVersion, per-resource sorted indexes, bounded watch history.

Contract:
- ``resourceVersion`` is one global counter, incremented by every stored write (create, update, delete)
  of any resource, as etcd's revision is. A dry run never reaches this module, so it consumes nothing.
- Objects are stored as plain dicts and are never mutated after being stored: callers hand in a fresh
  dict and must copy before changing what they read.
- Each write appends one event (ADDED/MODIFIED/DELETED with the old object) to a bounded history shared by
  all resources, and is delivered synchronously to the queues of the watchers of that resource, so a
  watcher registered before the write sees it and one registered after finds it in the history.
- ``get`` is a dict hit; ``list`` is a bisect into a sorted key list plus a walk over the result; nothing
  scans all objects. Keys sort as etcd keys do: by namespace, then name.
- A watcher whose queue grows past ``watcher_buffer`` events is closed (the real server drops slow
  watchers too); the client then resumes from its last resourceVersion.

Not promised: consistent snapshots across pages of a paginated list (later pages read current state).
"""

from __future__ import annotations

import asyncio
import bisect
import json
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects
StorageKey = tuple[str, str]  # (group, plural)


@dataclass
class Event:
    rv: int
    storage_key: StorageKey
    type: str  # ADDED, MODIFIED, DELETED
    obj: dict[str, Any]
    old: dict[str, Any] | None
    # serialised watch lines by (event type, apiVersion), shared by every watcher (see watch.py)
    lines: dict[tuple[str, str], bytes] = field(default_factory=dict, repr=False)


class Watcher:
    """One open watch: a queue of events for one resource, closed by ``close()`` or overflow."""

    def __init__(self, storage_key: StorageKey, namespace: str | None,
                 accepts: Callable[[Event], bool], buffer: int) -> None:
        self.storage_key = storage_key
        self.namespace = namespace
        self.accepts = accepts
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self.closed = False
        self._buffer = buffer

    def offer(self, event: Event) -> None:
        if self.closed:
            return
        if self.namespace is not None and event.obj.get("metadata", {}).get("namespace", "") != self.namespace:
            return
        if not self.accepts(event):
            return
        if self.queue.qsize() >= self._buffer:
            self.close()
            return
        self.queue.put_nowait(event)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(None)


@dataclass
class _Table:
    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    keys: list[Key] = field(default_factory=list)
    watchers: set[Watcher] = field(default_factory=set)
    last_rv: int = 0  # the resourceVersion of the newest event of this resource (a watch cache's progress)


class Storage:
    def __init__(self, *, history_size: int = 10000, watcher_buffer: int = 10000) -> None:
        if history_size < 1:
            raise ValueError("history_size must be at least 1")
        self._tables: dict[StorageKey, _Table] = {}
        self._rv = 1
        self._history: deque[Event] = deque()
        self._history_size = history_size
        # watching from an RV below this one cannot be served any more (410 Expired)
        self._floor = 1
        self._watcher_buffer = watcher_buffer
        # namespace -> storage keys holding objects in it (namespace deletion walks only those)
        self._ns_index: dict[str, dict[StorageKey, int]] = {}
        # owner uid -> dependents (storage key, namespace, name), for the garbage collector
        self._dependents: dict[str, set[tuple[StorageKey, str, str]]] = {}

    # resourceVersion and history --------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    def latest_rv(self, key: StorageKey) -> int:
        """The resourceVersion of the newest event of one resource (0: none yet): what a real server's watch
        cache of that resource has seen, and all its bookmarks can report."""
        table = self._tables.get(key)
        return table.last_rv if table is not None else 0

    @property
    def oldest_watchable(self) -> int:
        return self._floor

    def compact(self) -> None:
        """Drop the whole event history: any watch from an RV below the current one gets 410."""
        self._history.clear()
        self._floor = self._rv

    def _table(self, key: StorageKey) -> _Table:
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = _Table()
        return table

    def _record(self, key: StorageKey, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        event = Event(self._rv, key, type_, obj, old)
        self._history.append(event)
        while len(self._history) > self._history_size:
            self._floor = self._history.popleft().rv
        table = self._table(key)
        table.last_rv = event.rv
        for watcher in list(table.watchers):
            watcher.offer(event)

    def events_after(self, since: int, key: StorageKey) -> list[Event]:
        """History events of one resource newer than ``since``, oldest first (``since`` must not be
        older than ``oldest_watchable``)."""
        newer: list[Event] = []
        for event in reversed(self._history):
            if event.rv <= since:
                break
            if event.storage_key == key:
                newer.append(event)
        newer.reverse()
        return newer

    def next_resource_version(self) -> int:
        self._rv += 1
        return self._rv

    # reads --------------------------------------------------------------------------------------

    def get(self, key: StorageKey, namespace: str, name: str) -> dict[str, Any] | None:
        table = self._tables.get(key)
        return None if table is None else table.objects.get((namespace, name))

    def count(self, key: StorageKey, namespace: str | None = None) -> int:
        table = self._tables.get(key)
        if table is None:
            return 0
        if namespace is None:
            return len(table.keys)
        lo = bisect.bisect_left(table.keys, (namespace, ""))
        hi = bisect.bisect_left(table.keys, (namespace + "\x00", ""))
        return hi - lo

    def iterate(self, key: StorageKey, namespace: str | None, after: Key | None = None) -> Iterator[dict[str, Any]]:
        """Objects in key order, optionally only one namespace, starting after ``after``."""
        table = self._tables.get(key)
        if table is None:
            return
        keys = table.keys
        if after is not None:
            start = bisect.bisect_right(keys, after)
        elif namespace is not None:
            start = bisect.bisect_left(keys, (namespace, ""))
        else:
            start = 0
        for i in range(start, len(keys)):
            k = keys[i]
            if namespace is not None and k[0] != namespace:
                if k[0] > namespace:
                    return
                continue
            obj = table.objects.get(k)
            if obj is not None:
                yield obj

    def remaining_after(self, key: StorageKey, namespace: str | None, after: Key) -> int:
        table = self._tables.get(key)
        if table is None:
            return 0
        start = bisect.bisect_right(table.keys, after)
        end = len(table.keys) if namespace is None else bisect.bisect_left(table.keys, (namespace + "\x00", ""))
        return max(0, end - start)

    def namespaces_in_use(self, namespace: str) -> list[StorageKey]:
        return [k for k, n in self._ns_index.get(namespace, {}).items() if n > 0]

    def dependents(self, owner_uid: str) -> list[tuple[StorageKey, str, str]]:
        return sorted(self._dependents.get(owner_uid, ()))

    def _index_owners(self, key: StorageKey, k: Key, old: dict[str, Any] | None, new: dict[str, Any] | None
                      ) -> None:
        before = _owner_uids(old)
        after = _owner_uids(new)
        entry = (key, k[0], k[1])
        for uid in before - after:
            dependents = self._dependents.get(uid)
            if dependents is not None:
                dependents.discard(entry)
                if not dependents:
                    del self._dependents[uid]
        for uid in after - before:
            self._dependents.setdefault(uid, set()).add(entry)

    # writes -------------------------------------------------------------------------------------

    def put(self, key: StorageKey, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` (new or replacing), assigning the next resourceVersion; returns it."""
        meta = obj["metadata"]
        k = (meta.get("namespace", ""), meta["name"])
        table = self._table(key)
        old = table.objects.get(k)
        meta["resourceVersion"] = str(self.next_resource_version())
        table.objects[k] = obj
        if old is None:
            bisect.insort(table.keys, k)
            if k[0]:
                counts = self._ns_index.setdefault(k[0], {})
                counts[key] = counts.get(key, 0) + 1
        self._index_owners(key, k, old, obj)
        self._record(key, "ADDED" if old is None else "MODIFIED", obj, old)
        return obj

    def remove(self, key: StorageKey, obj: dict[str, Any]) -> dict[str, Any]:
        """Remove the stored object; the DELETED event carries a new resourceVersion, as etcd does."""
        meta = obj["metadata"]
        k = (meta.get("namespace", ""), meta["name"])
        table = self._table(key)
        old = table.objects.pop(k)
        index = bisect.bisect_left(table.keys, k)
        del table.keys[index]
        if k[0]:
            self._ns_index[k[0]][key] -= 1
        self._index_owners(key, k, old, None)
        final = dict(obj)
        final["metadata"] = dict(meta)
        final["metadata"]["resourceVersion"] = str(self.next_resource_version())
        self._record(key, "DELETED", final, old)
        return final

    def drop_table(self, key: StorageKey) -> list[dict[str, Any]]:
        """Remove every object of a resource (CRD deletion), emitting DELETED events."""
        table = self._tables.get(key)
        if table is None:
            return []
        removed = [self.remove(key, obj) for obj in list(table.objects.values())]
        for watcher in list(table.watchers):
            watcher.close()
        return removed

    # watch --------------------------------------------------------------------------------------

    def watch(self, key: StorageKey, namespace: str | None, since: int | None,
              accepts: Callable[[Event], bool]) -> tuple[Watcher, list[Event]] | None:
        """Register a watcher; returns it with the history events after ``since`` to replay first.

        ``since`` None means "from now" (the caller sends synthetic ADDED events itself). Returns None
        when ``since`` is older than the retained history (the caller answers 410 Expired).
        """
        if since is not None and since < self._floor:
            return None
        watcher = Watcher(key, namespace, accepts, self._watcher_buffer)
        backlog: list[Event] = []
        if since is not None:
            for event in reversed(self._history):
                if event.rv <= since:
                    break
                if event.storage_key == key:
                    backlog.append(event)
            backlog.reverse()
        self._table(key).watchers.add(watcher)
        return watcher, [e for e in backlog if _in_namespace(e, namespace) and accepts(e)]

    def unwatch(self, watcher: Watcher) -> None:
        table = self._tables.get(watcher.storage_key)
        if table is not None:
            table.watchers.discard(watcher)

    def close_all_watchers(self) -> int:
        count = 0
        for table in self._tables.values():
            for watcher in list(table.watchers):
                watcher.close()
                count += 1
        return count

    def watcher_count(self) -> int:
        return sum(len(t.watchers) for t in self._tables.values())


def _owner_uids(obj: dict[str, Any] | None) -> set[str]:
    if obj is None:
        return set()
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    return {str(r["uid"]) for r in refs if isinstance(r, dict) and r.get("uid")}


def _in_namespace(event: Event, namespace: str | None) -> bool:
    return namespace is None or event.obj.get("metadata", {}).get("namespace", "") == namespace


def encode(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()
