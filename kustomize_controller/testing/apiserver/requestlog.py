"""A log of served requests, so tests can count writes (e.g. "the second reconcile wrote nothing").

Contract: one record per request that reached the API router (authentication failures included), in
arrival order, bounded to ``max_records`` (oldest dropped). Records are immutable.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str
    query: str
    status: int
    user: str
    verb: str  # get, list, watch, create, update, patch, delete, deletecollection, or "" (non-resource)
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    dry_run: bool = False
    content_type: str = ""
    field_manager: str = ""

    @property
    def is_write(self) -> bool:
        return self.verb in WRITE_VERBS


class RequestLog:
    def __init__(self, *, max_records: int = 100_000) -> None:
        self._records: deque[RequestRecord] = deque(maxlen=max_records)

    def append(self, record: RequestRecord) -> None:
        self._records.append(record)

    def __iter__(self) -> Iterator[RequestRecord]:
        return iter(list(self._records))

    def __len__(self) -> int:
        return len(self._records)

    def clear(self) -> None:
        self._records.clear()

    def select(self, *, verb: str | None = None, resource: str | None = None, namespace: str | None = None,
               name: str | None = None, writes_only: bool = False, include_dry_run: bool = False,
               successful_only: bool = False) -> list[RequestRecord]:
        result = []
        for r in self._records:
            if writes_only and not r.is_write:
                continue
            if r.dry_run and not include_dry_run and r.is_write:
                continue
            if successful_only and r.status >= 400:
                continue
            if verb is not None and r.verb != verb:
                continue
            if resource is not None and r.resource != resource:
                continue
            if namespace is not None and r.namespace != namespace:
                continue
            if name is not None and r.name != name:
                continue
            result.append(r)
        return result

    def writes(self, **filters: str | None) -> list[RequestRecord]:
        """Writes that were not dry runs (any status), optionally filtered like ``select``."""
        return self.select(writes_only=True, **filters)  # type: ignore[arg-type]
