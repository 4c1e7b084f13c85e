"""Inventory bookkeeping (pure): change set → ``status.inventory``, diff, and merge-back of survivors.

Contract (kustomize-controller ``internal/inventory``, reference §2):
- ``from_change_set`` records every entry of the apply change set — created, configured, unchanged
  **and skipped** — in change-set order (the staged apply order), once per id (first wins); ids use
  ``api.inventory.format_inventory_id`` and ``v`` is the API version without the group.
- ``stale_objects(old, new)`` = entries of ``old`` whose id is not in ``new``, in ``old`` order, with the
  version recorded in ``old``. Entries of ``old`` that cannot be parsed are ignored (never deleted).
- ``merge_survivors(new, stale, prune_change_set)`` appends to ``new`` every stale object that prune did
  not delete or skip (its DELETE failed), so the next reconcile retries it.
- ``extended(old, additions)`` is ``old`` followed by every entry of ``additions`` it lacks, or None
  when it lacks none; ``with_objects(old, objects)`` the same for manifests (the inventory recorded
  before an apply that may create them).
"""

from __future__ import annotations

from collections.abc import Sequence

from kustomize_controller.api.inventory import (
    InventoryIdError,
    ObjectId,
    ResourceInventory,
    ResourceRef,
    parse_inventory_id,
)
from kustomize_controller.apply.changeset import Action, ChangeSet
from kustomize_controller.apply.objects import Object, ObjRef, version_of
from kustomize_controller.apply.prune import StaleObject


def object_id(ref: ObjRef) -> ObjectId:
    return ObjectId(namespace=ref.namespace, name=ref.name, group=ref.group, kind=ref.kind)


def obj_ref(obj_id: ObjectId) -> ObjRef:
    return ObjRef(group=obj_id.group, kind=obj_id.kind, namespace=obj_id.namespace, name=obj_id.name)


def from_change_set(change_set: ChangeSet) -> ResourceInventory:
    entries: list[ResourceRef] = []
    seen: set[str] = set()
    for entry in change_set:
        ref = ResourceRef.of(object_id(entry.ref), entry.version)
        if ref.id not in seen:
            seen.add(ref.id)
            entries.append(ref)
    return ResourceInventory(entries=entries)


def _parsed(inventory: ResourceInventory | None) -> list[tuple[ResourceRef, ObjectId]]:
    out: list[tuple[ResourceRef, ObjectId]] = []
    for ref in inventory.entries if inventory is not None else ():
        try:
            out.append((ref, parse_inventory_id(ref.id)))
        except InventoryIdError:
            continue
    return out


def inventory_objects(inventory: ResourceInventory | None) -> list[StaleObject]:
    """Every parseable entry as (identity, version), in inventory order (finalizer deletion input)."""
    return [StaleObject(ref=obj_ref(oid), version=ref.v) for ref, oid in _parsed(inventory)]


def stale_objects(old: ResourceInventory | None, new: ResourceInventory | None) -> list[StaleObject]:
    current = {oid for _, oid in _parsed(new)}
    return [StaleObject(ref=obj_ref(oid), version=ref.v) for ref, oid in _parsed(old) if oid not in current]


def merge_survivors(
    new: ResourceInventory, stale: Sequence[StaleObject], prune_change_set: ChangeSet
) -> ResourceInventory:
    handled = {e.ref for e in prune_change_set if e.action in (Action.DELETED, Action.SKIPPED)}
    entries = list(new.entries)
    ids = {e.id for e in entries}
    for obj in stale:
        if obj.ref in handled:
            continue
        ref = ResourceRef.of(object_id(obj.ref), obj.version)
        if ref.id not in ids:
            ids.add(ref.id)
            entries.append(ref)
    return ResourceInventory(entries=entries)


def extended(old: ResourceInventory | None, additions: ResourceInventory) -> ResourceInventory | None:
    """``old`` followed by the entries of ``additions`` it lacks (by object identity), or None when it
    lacks none."""
    entries = list(old.entries) if old is not None else []
    known = {oid for _, oid in _parsed(old)}
    for ref, oid in _parsed(additions):
        if oid not in known:
            known.add(oid)
            entries.append(ref)
    return ResourceInventory(entries=entries) if len(entries) > len(old.entries if old is not None else ()) else None


def with_objects(old: ResourceInventory | None, objects: Sequence[Object]) -> ResourceInventory | None:
    refs = [ResourceRef.of(object_id(ObjRef.from_object(obj)), version_of(obj)) for obj in objects]
    return extended(old, ResourceInventory(entries=refs))
