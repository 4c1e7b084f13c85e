"""Field sets: the leaf-level ownership model of server-side apply, and its ``FieldsV1`` encoding.

A path is a tuple of path elements spelled as in ``FieldsV1``: ``f:<field>`` for a map field,
``k:<json of key fields>`` for an item of a keyed list, ``v:<json value>`` for an element of a set.
``fields_of(obj)`` is the set of owned paths an object (or an applied configuration) carries: every leaf
(scalar, atomic list, empty map) plus one path per keyed-list item and per set element. It leaves out what
the server manages (``apiVersion``, ``kind``, name, namespace, uid, resourceVersion, generation,
timestamps, managedFields) and, unless asked, ``status``.

``encode``/``decode`` convert between sets and the nested ``FieldsV1`` dict (``"."`` marks an item that
is owned itself and has owned children). ``path_string`` renders a path as the real conflict messages do
(``.spec.containers[name="app"].image``, ``.metadata.finalizers[="x"]``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..kinds import ResourceType
from ..schema import FieldNames, list_type

PathElement = str
Path = tuple[PathElement, ...]

MISSING: Any = object()

_SERVER_METADATA = frozenset({
    "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
    "deletionGracePeriodSeconds", "managedFields", "selfLink", "generateName",
})


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def item_key(item: dict[str, Any], keys: tuple[str, ...]) -> PathElement:
    return "k:" + _compact({k: item[k] for k in keys if k in item})


def fields_of(rt: ResourceType, obj: dict[str, Any], *, status: bool | None = None) -> set[Path]:
    """Owned paths of ``obj``; ``status`` True = only status, False = all but status, None = everything."""
    result: set[Path] = set()
    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "status" and status is False:
            continue
        if key != "status" and status is True:
            continue
        if key == "metadata" and isinstance(value, dict):
            meta = {k: v for k, v in value.items() if k not in _SERVER_METADATA}
            if meta:
                _walk(rt, meta, ("f:metadata",), ("metadata",), result)
            continue
        _walk_value(rt, value, ("f:" + key,), (key,), result)
    return result


def _walk(rt: ResourceType, value: dict[str, Any], path: Path, names: FieldNames, out: set[Path]) -> None:
    for key, child in value.items():
        _walk_value(rt, child, (*path, "f:" + key), (*names, key), out)


def _walk_value(rt: ResourceType, value: Any, path: Path, names: FieldNames, out: set[Path]) -> None:
    if isinstance(value, dict) and value:
        _walk(rt, value, path, names, out)
    elif isinstance(value, list) and value:
        lt = list_type(rt, names)
        if lt.kind == "set":
            for element in value:
                out.add((*path, "v:" + _compact(element)))
        elif lt.kind == "map" and all(isinstance(item, dict) for item in value):
            for item in value:
                item_path = (*path, item_key(item, lt.keys))
                out.add(item_path)
                _walk(rt, item, item_path, names, out)
        else:
            out.add(path)
    else:
        out.add(path)


def value_at(rt: ResourceType, obj: Any, path: Path) -> Any:
    """The value at ``path``, ``MISSING`` when absent; keyed items and set elements compare by presence."""
    cur = obj
    names: FieldNames = ()
    for i, element in enumerate(path):
        kind, body = element[:2], element[2:]
        if kind == "f:":
            if not isinstance(cur, dict) or body not in cur:
                return MISSING
            cur = cur[body]
            names = (*names, body)
        elif kind == "k:":
            if not isinstance(cur, list):
                return MISSING
            keys = tuple(json.loads(body))
            found = next((item for item in cur if isinstance(item, dict) and item_key(item, keys) == element),
                         MISSING)
            if found is MISSING:
                return MISSING
            cur = found
            if i == len(path) - 1:
                return True
        elif kind == "v:":
            if not isinstance(cur, list):
                return MISSING
            return True if json.loads(body) in cur else MISSING
        else:
            return MISSING
    return cur


def remove_path(obj: dict[str, Any], path: Path) -> None:
    """Delete ``path`` from ``obj`` in place (no-op when absent)."""
    if not path:
        return
    parent: Any = obj
    for element in path[:-1]:
        parent = _step(parent, element)
        if parent is MISSING:
            return
    last = path[-1]
    kind, body = last[:2], last[2:]
    if kind == "f:" and isinstance(parent, dict):
        parent.pop(body, None)
    elif kind == "k:" and isinstance(parent, list):
        keys = tuple(json.loads(body))
        parent[:] = [item for item in parent if not (isinstance(item, dict) and item_key(item, keys) == last)]
    elif kind == "v:" and isinstance(parent, list):
        value = json.loads(body)
        parent[:] = [item for item in parent if item != value]


def _step(cur: Any, element: PathElement) -> Any:
    kind, body = element[:2], element[2:]
    if kind == "f:":
        return cur.get(body, MISSING) if isinstance(cur, dict) else MISSING
    if kind == "k:" and isinstance(cur, list):
        keys = tuple(json.loads(body))
        return next((item for item in cur if isinstance(item, dict) and item_key(item, keys) == element), MISSING)
    return MISSING


def encode(paths: Iterable[Path]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    marked: list[dict[str, Any]] = []
    for path in paths:
        node = root
        for element in path:
            node = node.setdefault(element, {})
        marked.append(node)
    for node in marked:
        if node:
            node["."] = {}
    return root


def decode(fields: dict[str, Any] | None) -> set[Path]:
    out: set[Path] = set()

    def walk(node: dict[str, Any], prefix: Path) -> None:
        for key, child in node.items():
            if key == ".":
                out.add(prefix)
            elif not child:
                out.add((*prefix, key))
            else:
                walk(child, (*prefix, key))

    walk(fields or {}, ())
    return out


def path_string(path: Path) -> str:
    parts = []
    for element in path:
        kind, body = element[:2], element[2:]
        if kind == "f:":
            parts.append("." + body)
        elif kind == "k:":
            keyed = json.loads(body)
            parts.append("[" + ",".join(f"{k}={_compact(v)}" for k, v in keyed.items()) + "]")
        elif kind == "v:":
            parts.append(f"[={body}]")
        else:
            parts.append(element)
    return "".join(parts)


def has_descendant(paths: set[Path], path: Path) -> bool:
    """True when ``paths`` holds ``path`` itself or something below it."""
    if path in paths:
        return True
    n = len(path)
    return any(len(p) > n and p[:n] == path for p in paths)
