"""How lists merge: the list types of structured-merge-diff and the merge keys of strategic merge patch.

A list is ``atomic`` (replaced whole, owned as one field), a ``set`` of scalars, or a ``map`` keyed by one or
more fields of its items. Custom resources take this from the CRD schema (``x-kubernetes-list-type`` and
``x-kubernetes-list-map-keys``; lists default to atomic as on a real server). Built-in kinds use the table
below, which covers the lists the real Go types mark ``+listType=map``/``set`` that manifests commonly
carry; any other built-in list is treated as atomic (documented in docs/testing.md).

A path here is the tuple of field names from the object root, list items skipped
(``("spec", "template", "spec", "containers")``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .kinds import ResourceType

FieldNames = tuple[str, ...]


@dataclass(frozen=True)
class ListType:
    kind: str  # atomic, set, map
    keys: tuple[str, ...] = ()
    # the single key strategic merge patch merges by (None: the list is replaced by a strategic patch)
    patch_key: str | None = None


ATOMIC = ListType("atomic")
SET = ListType("set", patch_key="")

_CONTAINER_LISTS = {"containers", "initContainers", "ephemeralContainers"}


def _builtin_list_type(path: FieldNames) -> ListType:
    if not path:
        return ATOMIC
    name = path[-1]
    parent = path[-2] if len(path) > 1 else ""
    inside_container = any(p in _CONTAINER_LISTS for p in path[:-1])
    if path == ("metadata", "finalizers"):
        return SET
    if path == ("metadata", "ownerReferences"):
        return ListType("map", ("uid",), "uid")
    if name in _CONTAINER_LISTS or name in ("volumes", "imagePullSecrets", "resourceClaims", "schedulingGates"):
        return ListType("map", ("name",), "name")
    if name == "env" and inside_container:
        return ListType("map", ("name",), "name")
    if name == "ports" and inside_container:
        return ListType("map", ("containerPort", "protocol"), "containerPort")
    if path == ("spec", "ports"):  # Service
        return ListType("map", ("port", "protocol"), "port")
    if name == "volumeMounts":
        return ListType("map", ("mountPath",), "mountPath")
    if name == "volumeDevices":
        return ListType("map", ("devicePath",), "devicePath")
    if name == "hostAliases":
        return ListType("map", ("ip",), "ip")
    if name == "topologySpreadConstraints":
        return ListType("map", ("topologyKey", "whenUnsatisfiable"), "topologyKey")
    if name == "conditions" and parent == "status":
        return ListType("map", ("type",), "type")
    return ATOMIC


def _schema_at(schema: dict[str, Any] | None, path: FieldNames) -> dict[str, Any] | None:
    cur = schema
    for name in path:
        if cur is None:
            return None
        if cur.get("type") == "array" or "items" in cur:
            cur = cur.get("items")
            if cur is None:
                return None
        props = cur.get("properties")
        if props is not None and name in props:
            cur = props[name]
        elif isinstance(cur.get("additionalProperties"), dict):
            cur = cur["additionalProperties"]
        else:
            return None
    return cur


def list_type(rt: ResourceType, path: FieldNames) -> ListType:
    if path and path[0] == "metadata":
        return _builtin_list_type(path)
    if not rt.custom:
        return _builtin_list_type(path)
    node = _schema_at(rt.schema, path)
    if node is None:
        return ATOMIC
    declared = node.get("x-kubernetes-list-type")
    if declared == "set":
        return SET
    if declared == "map":
        keys = tuple(node.get("x-kubernetes-list-map-keys") or ())
        return ListType("map", keys, keys[0] if len(keys) == 1 else None)
    return ATOMIC
