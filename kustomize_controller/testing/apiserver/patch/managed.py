"""managedFields bookkeeping: who owns which fields, for Update operations and for server-side apply.

Entries are identified as the real server does: (manager, operation, subresource, apiVersion) for
``Update`` entries and (manager, operation, subresource) for ``Apply`` entries. Every entry carries the
time of its last change and a ``FieldsV1`` set. Entries left with no fields are dropped.

A client may rewrite ``managedFields`` through any non-apply write (Flux does, to take over fields from
kubectl); ``[]`` or leaving the field out keeps the stored entries, ``[{}]`` strips them all.

``record_update`` implements the ownership rule for non-apply writes (create, PUT, merge/json/strategic
patch): the writer takes every field whose value it changed or added, other managers lose those fields, and
fields that disappeared leave every set. No conflicts are possible for those writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..kinds import ResourceType
from .fieldsets import Path, decode, encode, fields_of, value_at


@dataclass
class Entry:
    manager: str
    operation: str  # Apply or Update
    api_version: str
    subresource: str
    time: str
    fields: set[Path]

    def identity(self) -> tuple[str, str, str, str]:
        version = self.api_version if self.operation == "Update" else ""
        return (self.manager, self.operation, self.subresource, version)

    def display(self) -> str:
        """How conflict messages name this manager (``printManager`` in kube-apiserver)."""
        text = f'"{self.manager}"'
        if self.subresource:
            text += f' with subresource "{self.subresource}"'
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": encode(sorted(self.fields)),
        }
        if self.subresource:
            entry["subresource"] = self.subresource
        return entry


def load(obj: dict[str, Any] | None) -> list[Entry]:
    if not obj:
        return []
    entries = []
    for raw in obj.get("metadata", {}).get("managedFields") or []:
        if not isinstance(raw, dict) or (not raw.get("manager") and raw.get("manager") != ""):
            continue
        entries.append(Entry(
            manager=str(raw.get("manager", "")),
            operation=str(raw.get("operation", "Update")),
            api_version=str(raw.get("apiVersion", "")),
            subresource=str(raw.get("subresource", "")),
            time=str(raw.get("time", "")),
            fields=decode(raw.get("fieldsV1")),
        ))
    return entries


def store(obj: dict[str, Any], entries: list[Entry]) -> None:
    """Write ``entries`` (those owning something) into ``obj``, in the real server's order: by operation
    (Apply before Update), then time, manager, apiVersion and subresource."""
    ordered = sorted((e for e in entries if e.fields),
                     key=lambda e: (e.operation, e.time, e.manager, e.api_version, e.subresource))
    kept = [e.to_json() for e in ordered]
    if kept:
        obj["metadata"]["managedFields"] = kept
    else:
        obj["metadata"].pop("managedFields", None)


def status_scope(rt: ResourceType, subresource: str) -> bool | None:
    """Which part of the object a write through ``subresource`` may own (see ``fields_of``)."""
    if subresource == "status":
        return True
    return False if rt.has_status else None


def find(entries: list[Entry], identity: tuple[str, str, str, str]) -> Entry | None:
    return next((e for e in entries if e.identity() == identity), None)


def changed_paths(rt: ResourceType, old: dict[str, Any] | None, new: dict[str, Any], scope: bool | None
                  ) -> tuple[set[Path], set[Path]]:
    """(paths whose value was added or changed, paths that disappeared) between ``old`` and ``new``."""
    new_fields = fields_of(rt, new, status=scope)
    if old is None:
        return new_fields, set()
    old_fields = fields_of(rt, old, status=scope)
    changed = {p for p in new_fields if p not in old_fields or value_at(rt, old, p) != value_at(rt, new, p)}
    return changed, old_fields - new_fields


def record_update(rt: ResourceType, old: dict[str, Any] | None, new: dict[str, Any], *, manager: str,
                  subresource: str, now: str) -> None:
    """Update ``new``'s managedFields (in place) for a non-apply write by ``manager``."""
    entries = load(old) if old is not None else []
    sent = new["metadata"].get("managedFields")
    if sent == [{}]:
        # one empty entry is the documented way to strip managedFields entirely
        new["metadata"].pop("managedFields", None)
        return
    if old is not None and sent and sent != old.get("metadata", {}).get("managedFields"):
        # the client rewrote managedFields itself: take its version. Absent or [] keeps the stored ones,
        # so clients unaware of the field never strip it.
        entries = load(new)
    scope = status_scope(rt, subresource)
    changed, removed = changed_paths(rt, old, new, scope)
    gone = changed | removed
    for entry in entries:
        entry.fields -= gone
    if changed:
        identity = (manager, "Update", subresource, rt.api_version)
        mine = find(entries, identity)
        if mine is None:
            mine = Entry(manager, "Update", rt.api_version, subresource, now, set())
            entries.append(mine)
        mine.fields |= changed
        mine.time = now
    store(new, entries)
