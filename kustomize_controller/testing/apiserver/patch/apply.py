"""Server-side apply (``application/apply-patch+yaml``): merge, ownership, conflicts, force, removal.

Given the live object (or none), an applied configuration and a field manager:
1. The applied configuration is merged into the live object by structure: maps merge key by key, keyed
   lists merge item by item (by their keys), sets union, atomic lists and scalars are replaced.
2. Fields this manager applied last time but no longer sends are removed from the result, unless another
   manager owns them (or something below them).
3. Fields whose value the apply changes and that another manager owns are conflicts: 409 with one
   ``FieldManagerConflict`` cause per field, unless ``force`` — then the other managers lose them.
   Setting a field to the value it already has never conflicts: ownership is shared.
4. The manager's Apply entry becomes exactly the set of fields it sent.

Approximations (docs/testing.md): the applied configuration itself is not defaulted (the merged result is,
as every write); ``null`` in an applied configuration removes the field.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from ..errors import ApiStatusError
from ..kinds import ResourceType
from ..schema import FieldNames, list_type
from .fieldsets import MISSING, Path, fields_of, has_descendant, item_key, path_string, remove_path, value_at
from .managed import Entry, before_first_apply, find, load, status_scope, store


def structured_merge(rt: ResourceType, live: Any, applied: Any, names: FieldNames = ()) -> Any:
    if isinstance(applied, dict):
        result = dict(live) if isinstance(live, dict) else {}
        for key, value in applied.items():
            if value is None:
                result.pop(key, None)
            else:
                result[key] = structured_merge(rt, result.get(key), value, (*names, key))
        return result
    if isinstance(applied, list):
        lt = list_type(rt, names)
        if lt.kind == "set" and isinstance(live, list):
            return interleave(live, applied, _set_key, lambda _live, item: copy.deepcopy(item))
        if (lt.kind == "map" and isinstance(live, list) and all(isinstance(i, dict) for i in applied)
                and all(isinstance(i, dict) for i in live)):
            def key(item: Any) -> str:
                return item_key(item, lt.keys)

            def merge(have: Any, item: Any) -> Any:
                return structured_merge(rt, have if have is not None else {}, item, names)

            return interleave(live, applied, key, merge)
        return copy.deepcopy(applied)
    return copy.deepcopy(applied)


def _set_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def interleave(live: list[Any], applied: list[Any], key: Callable[[Any], str],
               merge: Callable[[Any, Any], Any]) -> list[Any]:
    """Merge two associative lists the way structured-merge-diff orders them: applied items in applied
    order, each live-only item kept just where it stood relative to the items both lists share."""
    live_keys = [key(item) for item in live]
    applied_keys = [key(item) for item in applied]
    live_by_key = dict(zip(live_keys, live, strict=True))
    applied_by_key = dict(zip(applied_keys, applied, strict=True))
    shared = [k for k in applied_keys if k in live_by_key]
    out: list[Any] = []
    merged: set[str] = set()
    li = ri = 0
    next_shared = shared.pop(0) if shared else None
    while li < len(live) or ri < len(applied):
        if li < len(live) and ri < len(applied):
            lk = live_keys[li]
            if lk == applied_keys[ri]:
                out.append(merge(live_by_key[lk], applied_by_key[lk]))
                merged.add(lk)
                li += 1
                ri += 1
                next_shared = shared.pop(0) if shared else None
                continue
            if lk in applied_by_key and next_shared is not None and next_shared != lk:
                li += 1  # a shared item, but not the next one in applied order: it comes later
                continue
        if li < len(live):
            lk = live_keys[li]
            if lk not in applied_by_key:
                out.append(copy.deepcopy(live[li]))
                li += 1
                continue
            if lk in merged:
                li += 1
                continue
        if ri < len(applied):
            rk = applied_keys[ri]
            merged.add(rk)
            out.append(merge(live_by_key.get(rk), applied_by_key[rk]))
            ri += 1
            if next_shared is not None and next_shared == rk:
                next_shared = shared.pop(0) if shared else None
    return out


def conflict_error(conflicts: list[tuple[Entry, Path]]) -> ApiStatusError:
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {e.display()}", "field": path_string(p)}
              for e, p in conflicts]
    if len(conflicts) == 1:
        entry, path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {entry.display()}: {path_string(path)}"
    else:
        by_manager: dict[str, list[str]] = {}
        for entry, path in conflicts:
            by_manager.setdefault(entry.display(), []).append(path_string(path))
        lines = []
        for manager in sorted(by_manager):
            lines.append(f"conflicts with {manager}:")
            lines.extend(f"- {p}" for p in by_manager[manager])
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ApiStatusError(409, "Conflict", message, {"causes": causes})


def server_side_apply(rt: ResourceType, live: dict[str, Any] | None, applied: dict[str, Any], *, manager: str,
                      force: bool, subresource: str, now: str) -> dict[str, Any]:
    """The object after applying ``applied`` to ``live``, managedFields included. Raises 409 on conflicts."""
    scope = status_scope(rt, subresource)
    config = copy.deepcopy(applied)
    if scope is False:
        config.pop("status", None)
    elif scope is True:
        config = {"status": config["status"]} if "status" in config else {}
    applied_fields = fields_of(rt, config, status=scope)

    entries = load(live)
    if live is not None and not entries:
        entries = [before_first_apply(rt, live, subresource=subresource, now=now)]
    identity = (manager, "Apply", subresource, "")
    mine = find(entries, identity)
    previous = mine.fields if mine is not None else set()
    others = [e for e in entries if e is not mine and e.subresource == subresource]
    owned_by_others: set[Path] = set().union(*(e.fields for e in others)) if others else set()

    base: dict[str, Any] = copy.deepcopy(live) if live is not None else {}
    merged: dict[str, Any] = structured_merge(rt, base, config)
    removed: set[Path] = set()
    for path in sorted(previous - applied_fields, key=len):
        # kept: what others own (at or below it), what the applier still sends below it (an empty map it
        # sent before now has content), what went with a removed parent, and key fields of kept items
        if (has_descendant(owned_by_others, path) or has_descendant(applied_fields, path)
                or _has_ancestor(removed, path) or _is_item_key(path)):
            continue
        remove_path(merged, path)
        removed.add(path)
    _prune_empty_metadata(merged, applied_fields | owned_by_others)

    live_obj = live if live is not None else {}
    changed = {p for p in applied_fields if _differs(rt, live_obj, merged, config, p)}
    conflicts = [(e, p) for e in others for p in sorted(e.fields & changed)]
    if conflicts and not force:
        raise conflict_error(conflicts)
    for entry, path in conflicts:
        entry.fields.discard(path)

    if mine is None:
        mine = Entry(manager, "Apply", rt.api_version, subresource, now, set())
        entries.append(mine)
    if mine.fields != applied_fields or changed:
        mine.time = now
    mine.fields = applied_fields
    mine.api_version = rt.api_version
    merged.setdefault("metadata", {})
    store(merged, entries)
    return merged


def _differs(rt: ResourceType, live: Any, merged: Any, config: Any, path: Path) -> bool:
    before, after = value_at(rt, live, path), value_at(rt, merged, path)
    if value_at(rt, config, path) == {}:
        # an empty map sent by the applier owns the map's existence, not its content
        return (before is MISSING) != (after is MISSING)
    return bool(before != after)


def _has_ancestor(paths: set[Path], path: Path) -> bool:
    return any(path[:n] in paths for n in range(1, len(path)))


def _is_item_key(path: Path) -> bool:
    """A key field of a keyed-list item (removing it alone would corrupt the item)."""
    if len(path) < 2 or not path[-2].startswith("k:") or not path[-1].startswith("f:"):
        return False
    return path[-1][2:] in json.loads(path[-2][2:])


def _prune_empty_metadata(obj: dict[str, Any], applied: set[Path]) -> None:
    """Empty label/annotation/finalizer maps left by removals disappear (as they do from typed objects),
    unless a manager owns them as empty maps."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for key in ("labels", "annotations", "finalizers", "ownerReferences"):
            if key in meta and not meta[key] and ("f:metadata", "f:" + key) not in applied:
                del meta[key]


__all__ = ["MISSING", "conflict_error", "server_side_apply", "structured_merge"]
