"""A minimal OpenAPI v3 discovery: enough for kubectl to see that the server validates fields itself.

``/openapi/v3`` lists one document per served group/version; each document has, per resource, the item
path with a PATCH operation tagged with ``x-kubernetes-group-version-kind`` and the ``fieldValidation``
query parameter. kubectl (``--validate=strict``, its default) then sends ``fieldValidation`` to the server
instead of downloading schemas. No component schemas are served (``kubectl explain`` does not work).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .kinds import Registry, ResourceType

_PARAMS = [
    {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
    for name in ("dryRun", "fieldManager", "fieldValidation", "force")
]


def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _item_path(rt: ResourceType) -> str:
    prefix = "/" + _gv_path(rt.group, rt.version)
    scope = "/namespaces/{namespace}" if rt.namespaced else ""
    return f"{prefix}{scope}/{rt.plural}/{{name}}"


def document(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = registry.types_in(group, version)
    if not types:
        return None
    paths: dict[str, Any] = {}
    for rt in types:
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        paths[_item_path(rt)] = {"patch": {
            "operationId": f"patch{rt.kind}",
            "parameters": _PARAMS,
            "responses": {"200": {"description": "OK"}},
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
        }}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.36.0"}, "paths": paths,
            "components": {"schemas": {}}}


def index(registry: Registry) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for group, version in registry.group_versions():
        doc = document(registry, group, version)
        digest = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()
        gv = _gv_path(group, version)
        paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={digest}"}
    return {"paths": paths}
