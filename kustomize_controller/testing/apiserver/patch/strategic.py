"""Strategic merge patch for built-in kinds (``application/strategic-merge-patch+json``).

Maps merge as in a JSON merge patch. Lists with a patch merge key (containers, env and volumes by name,
container ports by containerPort, Service ports by port, volumeMounts by mountPath, conditions by type,
ownerReferences by uid — see ``schema.py``) merge item by item; lists of scalars with a merge strategy
(``metadata.finalizers``) merge as sets; every other list is replaced. Directives understood:
``$patch: delete`` on a list item or map, ``$patch: replace`` on a map or list item, ``$patch: merge``,
``$deleteFromPrimitiveList/<field>``, ``$retainKeys``; ``$setElementOrder/<field>`` reorders merged items.

Order of a merged list (apimachinery's ``normalizeElementOrder``): the items the patch names, in patch
order, and the live-only items, in live order, interleaved by their live positions where both sides
have one; an item only the patch has goes before the live-only item it is compared with (so a new
``env`` entry lands first). ``$setElementOrder`` takes precedence over all of that.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ..errors import bad_request
from ..kinds import ResourceType
from ..schema import FieldNames, list_type

_DELETE_FROM = "$deleteFromPrimitiveList/"
_SET_ORDER = "$setElementOrder/"


def strategic_merge_patch(rt: ResourceType, target: dict[str, Any], patch: Any) -> dict[str, Any]:
    if not isinstance(patch, dict):
        raise bad_request("strategic merge patch must be a JSON object")
    result = _merge_map(rt, target, patch, ())
    if not isinstance(result, dict):
        raise bad_request("strategic merge patch deleted the whole object")
    return result


def _merge_map(rt: ResourceType, target: Any, patch: dict[str, Any], path: FieldNames) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith(_SET_ORDER):
            continue
        if key.startswith(_DELETE_FROM):
            field = key[len(_DELETE_FROM):]
            current = result.get(field)
            if isinstance(current, list) and isinstance(value, list):
                result[field] = [item for item in current if item not in value]
            continue
        if value is None:
            result.pop(key, None)
            continue
        child = (*path, key)
        if isinstance(value, dict):
            merged = _merge_map(rt, result.get(key), value, child)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(rt, result.get(key), value, child)
            order = patch.get(_SET_ORDER + key)
            if isinstance(order, list):
                result[key] = _reorder(result[key], order, list_type(rt, child).patch_key)
        else:
            result[key] = copy.deepcopy(value)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(rt: ResourceType, target: Any, patch: list[Any], path: FieldNames) -> list[Any]:
    lt = list_type(rt, path)
    current = list(target) if isinstance(target, list) else []
    if lt.patch_key is None or lt.kind == "atomic":
        return [copy.deepcopy(item) for item in patch if not _is_directive(item)]
    if lt.kind == "set" or lt.patch_key == "":
        original = list(current)
        for item in patch:
            if item not in current:
                current.append(copy.deepcopy(item))
        return _patch_order(current, [item for item in patch if not _is_directive(item)], original, None)
    key = lt.patch_key
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(item) for item in patch if not _is_directive(item)]
    original = list(current)
    for item in patch:
        if not isinstance(item, dict):
            raise bad_request(f"strategic merge patch: list item of {'.'.join(path)} is not an object")
        if key not in item:
            raise bad_request(f"map: {item} does not contain declared merge key: {key}")
        index = next((i for i, have in enumerate(current)
                      if isinstance(have, dict) and have.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del current[index]
            continue
        if index is None:
            current.append(_merge_map(rt, {}, item, path))
        else:
            current[index] = _merge_map(rt, current[index], item, path)
    named = [item for item in patch if isinstance(item, dict) and item.get("$patch") != "delete"]
    return _patch_order(current, named, original, key)


def _patch_order(merged: list[Any], patch: list[Any], original: list[Any], key: str | None) -> list[Any]:
    """``merged`` in the order the real server gives a strategic merge (module docstring)."""
    def ident(item: Any) -> str:
        return json_key(item.get(key) if key and isinstance(item, dict) else item)

    patch_rank: dict[str, int] = {}
    for item in patch:
        patch_rank.setdefault(ident(item), len(patch_rank))
    live_rank: dict[str, int] = {}
    for item in original:
        live_rank.setdefault(ident(item), len(live_rank))
    named = sorted((m for m in merged if ident(m) in patch_rank), key=lambda m: patch_rank[ident(m)])
    server_only = [m for m in merged if ident(m) not in patch_rank]
    result: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(named):
        if j >= len(named):
            result.append(server_only[i])
            i += 1
        elif i >= len(server_only):
            result.append(named[j])
            j += 1
        else:
            left, right = live_rank.get(ident(server_only[i])), live_rank.get(ident(named[j]))
            if left is not None and right is not None and left < right:
                result.append(server_only[i])
                i += 1
            else:
                result.append(named[j])
                j += 1
    return result


def _is_directive(item: Any) -> bool:
    return isinstance(item, dict) and "$patch" in item and len(item) == 1


def _reorder(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
    def ident(item: Any) -> Any:
        return item.get(key) if key and isinstance(item, dict) else item

    wanted = [ident(o) for o in order]
    position = {json_key(v): i for i, v in enumerate(wanted)}
    return sorted(items, key=lambda it: position.get(json_key(ident(it)), len(position)))


def json_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
