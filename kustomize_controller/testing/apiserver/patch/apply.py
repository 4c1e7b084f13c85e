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

Approximations (docs/testing.md): no defaulting of the applied configuration; ``null`` in an applied
configuration removes the field; list item order of a merge keeps live items first, new items appended.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ..errors import ApiStatusError
from ..kinds import ResourceType
from ..schema import FieldNames, list_type
from .fieldsets import MISSING, Path, fields_of, has_descendant, item_key, path_string, remove_path, value_at
from .managed import Entry, find, load, status_scope, store


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
            merged = list(live)
            for element in applied:
                if element not in merged:
                    merged.append(copy.deepcopy(element))
            return merged
        if lt.kind == "map" and isinstance(live, list) and all(isinstance(i, dict) for i in applied):
            merged = [copy.deepcopy(i) for i in live]
            for item in applied:
                ident = item_key(item, lt.keys)
                index = next((n for n, have in enumerate(merged)
                              if isinstance(have, dict) and item_key(have, lt.keys) == ident), None)
                if index is None:
                    merged.append(structured_merge(rt, {}, item, names))
                else:
                    merged[index] = structured_merge(rt, merged[index], item, names)
            return merged
        return copy.deepcopy(applied)
    return copy.deepcopy(applied)


def conflict_error(conflicts: list[tuple[Entry, Path]]) -> ApiStatusError:
    causes = [{"type": "FieldManagerConflict", "message": f"conflict with {e.display()}", "field": path_string(p)}
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
