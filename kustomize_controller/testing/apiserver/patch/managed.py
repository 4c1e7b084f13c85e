"""managedFields bookkeeping: who owns which fields, for Update operations and for server-side apply.

Entries are identified as the real server does: (manager, operation, subresource, apiVersion) for
``Update`` entries and (manager, operation, subresource) for ``Apply`` entries. Every entry carries the
time of its last change and a ``FieldsV1`` set. Entries left with no fields are dropped.

A client may rewrite ``managedFields`` through any non-apply write (Flux does, to take over fields from
kubectl). As kube-apiserver's field manager decides (``decodeLiveOrNew``): leaving the field out keeps the
stored entries; ``[]`` or ``[{}]`` resets them; a list the server cannot decode (an entry that is not an
object, a ``fieldsType`` other than ``FieldsV1``, an operation other than Apply/Update) or that owns
nothing is ignored and the stored entries kept; writes through a subresource never set them.

Ownership of non-apply writes (create, PUT, merge/json/strategic patch), ``record_update``: the writer
takes every field whose value it changed or added, and every map it created (``"."`` in ``FieldsV1``, as
structured-merge-diff's comparison reports the map itself as added); other managers lose those fields;
fields that disappeared leave every set. No conflicts are possible for those writes. A built-in object
starts from its zero value, whose Go structs (``spec``, ``spec.template``…) exist already, so creating
them is not owning them; a custom resource starts from nothing. ``metadata`` itself is never owned.

No tracking without entries (the real ``skipNonAppliedManager``): an update of an object that has no
managedFields (never had, or stripped) records nothing; the next Apply first records a
``before-first-apply`` Update entry owning everything the object holds, then the apply.
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
    """(paths the writer of ``new`` comes to own: values added or changed and maps created, paths that
    disappeared) between ``old`` (None: a create) and ``new``."""
    new_fields = fields_of(rt, new, status=scope)
    new_maps = maps_above(new_fields)
    if old is None:
        return new_fields | (new_maps - (set() if rt.custom else BUILTIN_SKELETON)), set()
    old_fields = fields_of(rt, old, status=scope)
    old_nodes = old_fields | maps_above(old_fields)
    changed = {p for p in new_fields if p not in old_fields or value_at(rt, old, p) != value_at(rt, new, p)}
    return changed | (new_maps - old_nodes), old_nodes - (new_fields | new_maps)


def maps_above(paths: set[Path]) -> set[Path]:
    """The maps holding the given paths (a map field followed by a field, not a list item), ``metadata``
    excepted (the field manager never tracks it)."""
    maps = {p[:i] for p in paths for i in range(1, len(p)) if p[i - 1].startswith("f:") and p[i].startswith("f:")}
    maps.discard(("f:metadata",))
    return maps


# Maps a zero-valued built-in object already holds: Go struct fields, not pointers or Go maps.
BUILTIN_SKELETON: frozenset[Path] = frozenset({
    ("f:spec",), ("f:status",),
    ("f:spec", "f:template"), ("f:spec", "f:template", "f:metadata"), ("f:spec", "f:template", "f:spec"),
    ("f:template",), ("f:template", "f:metadata"), ("f:template", "f:spec"),
    ("f:spec", "f:strategy"), ("f:spec", "f:updateStrategy"), ("f:spec", "f:resources"),
    ("f:spec", "f:jobTemplate"), ("f:spec", "f:jobTemplate", "f:metadata"), ("f:spec", "f:jobTemplate", "f:spec"),
    ("f:spec", "f:jobTemplate", "f:spec", "f:template"),
    ("f:spec", "f:jobTemplate", "f:spec", "f:template", "f:metadata"),
    ("f:spec", "f:jobTemplate", "f:spec", "f:template", "f:spec"),
})


def sent_entries(sent: Any) -> list[Entry] | None:
    """The entries a client sent in ``metadata.managedFields``: ``[]`` for a reset, ``None`` when they
    are to be ignored (absent, undecodable, or owning nothing)."""
    if sent is None:
        return None
    if sent == [] or sent == [{}]:
        return []
    if not isinstance(sent, list):
        return None
    for raw in sent:
        if (not isinstance(raw, dict) or raw.get("fieldsType") != "FieldsV1"
                or raw.get("operation") not in ("Apply", "Update") or not isinstance(raw.get("manager", ""), str)
                or not isinstance(raw.get("fieldsV1", {}), dict)):
            return None
    entries = load({"metadata": {"managedFields": sent}})
    return entries if any(e.fields for e in entries) else None


def record_update(rt: ResourceType, old: dict[str, Any] | None, new: dict[str, Any], *, manager: str,
                  subresource: str, now: str) -> None:
    """Update ``new``'s managedFields (in place) for a non-apply write by ``manager`` (module contract)."""
    entries = load(old) if old is not None else []
    if old is not None and not subresource:
        sent = sent_entries(new["metadata"].get("managedFields"))
        if sent is not None:
            entries = sent
    if old is not None and not entries:
        new["metadata"].pop("managedFields", None)  # nothing tracked: keep it that way until an Apply
        return
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


def before_first_apply(rt: ResourceType, live: dict[str, Any], *, subresource: str, now: str) -> Entry:
    """The Update entry an Apply to an object without managedFields first records for what it holds."""
    owned, _ = changed_paths(rt, None, live, status_scope(rt, subresource))
    return Entry("before-first-apply", "Update", rt.api_version, subresource, now, owned)
