"""The typed round trip upstream gives every object of a built-in kind before applying it.

fluxcd/pkg ``ssa/normalize`` converts each object whose kind client-go's scheme knows into its Go struct
and back (``runtime.DefaultUnstructuredConverter``). That round trip changes what is applied, and so what
upstream's field manager owns:

- fields the struct lacks are dropped (a typo, a field of a newer Kubernetes): server-side apply would
  refuse them (``.spec.replica: field not declared in schema``); upstream applies without them;
- fields that are non-pointer structs, or lack ``omitempty``, are written out when the manifest has
  none: a Deployment is applied with ``strategy: {}`` and each container with ``resources: {}``, a pod
  template with ``metadata: {}``, a Namespace with ``spec: {}`` — and upstream owns ``f:strategy``,
  ``f:resources``…, which a controller applying the manifest as written would not (the swap would move
  field ownership).

``normalize_typed(obj)`` does the same from ``typedschema.json``, a table of those structs made from
kube-apiserver v1.36's OpenAPI documents (``scripts/gen_typedschema.py``; k8s.io/api v0.36 is what
upstream v1.9.x links): for each built-in kind, the properties of its types, and the zero value a field is
written with when absent. Kinds not in the table (custom resources, CRDs) are left alone, as upstream
leaves kinds its scheme lacks. Values are not re-encoded (a quantity keeps its spelling: the server
canonicalises it, and field ownership does not depend on it), and an object whose fields have the wrong
JSON type is not rejected here: the dry-run reports it with the server's words, as upstream's does (its
round trip gives up on such an object).

The table is loaded on first use (~200 KB of JSON, once per process).
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

from kustomize_controller.apply.objects import Object, api_version

TABLE = "typedschema.json"
_NOT_IN_CLIENT_GO_SCHEME = ("apiextensions.k8s.io", "apiregistration.k8s.io")
# int-or-string fields that are values, not pointers, in k8s.io/api v0.36: the round trip writes their zero
# value (0) when absent — a Service port without targetPort is applied with targetPort: 0, which the server
# defaults to the port, and upstream owns it. kube-openapi gives int-or-string no default, so the OpenAPI
# documents cannot tell these from the pointers (RollingUpdateDeployment.maxSurge, PDB minAvailable, …).
_INT_OR_STRING_VALUES = {
    ("io.k8s.api.core.v1.ServicePort", "targetPort"),
    ("io.k8s.api.core.v1.HTTPGetAction", "port"),
    ("io.k8s.api.core.v1.TCPSocketAction", "port"),
}


@functools.cache
def _table() -> tuple[Mapping[str, str], Mapping[str, Mapping[str, Any]]]:
    data = json.loads(resources.files("kustomize_controller.apply").joinpath(TABLE).read_text())
    return data["roots"], data["types"]


def root_type(api_version_: str, kind: str) -> str | None:
    """The table's type of a built-in ``apiVersion``/``kind``, ``None`` for any other kind."""
    roots, _ = _table()
    return roots.get(f"{api_version_}/{kind}")


def normalize_typed(obj: Object) -> bool:
    """Round-trip ``obj`` in place as client-go's typed structs would; ``False`` for a kind the table lacks."""
    root = root_type(api_version(obj), str(obj.get("kind") or ""))
    if root is None:
        return False
    _, types = _table()
    _struct(obj, root, types)
    return True


def _struct(value: dict[str, Any], name: str, types: Mapping[str, Mapping[str, Any]]) -> None:
    spec = types.get(name)
    if spec is None:
        return
    props = spec.get("p")
    if props is None:
        values = spec.get("a")
        if values is not None:
            for item in value.values():
                _value(item, values, types)
        return
    if not spec.get("u"):
        for key in [k for k in value if k not in props]:
            del value[key]
    for key, prop in props.items():
        if key in value:
            _value(value[key], prop, types)
        elif "d" in prop:
            zero = copy.copy(prop["d"])
            value[key] = zero
            if isinstance(zero, dict):
                _value(zero, prop, types)


def _value(value: Any, prop: Mapping[str, Any], types: Mapping[str, Mapping[str, Any]]) -> None:
    if prop.get("u"):
        return
    ref = prop.get("r")
    if ref is not None:
        if isinstance(value, dict):
            _struct(value, ref, types)
        return
    items = prop.get("i")
    if items is not None and isinstance(value, list):
        for item in value:
            _value(item, items, types)
        return
    values = prop.get("a")
    if values is not None and isinstance(value, dict):
        for item in value.values():
            _value(item, values, types)


# --- the table, from OpenAPI v3 documents (scripts/gen_typedschema.py; the real-cluster test) -------------


def builtin_group_version(path: str) -> tuple[str, str] | None:
    """(group, version) of an ``/openapi/v3`` path of Kubernetes' own API, else ``None`` (custom resources,
    and the apiextensions and apiregistration groups, which client-go's scheme does not hold)."""
    parts = path.split("/")
    if parts == ["api", "v1"]:
        return "", "v1"
    if len(parts) == 3 and parts[0] == "apis":
        group = parts[1]
        if (group.endswith(".k8s.io") or "." not in group) and group not in _NOT_IN_CLIENT_GO_SCHEME:
            return group, parts[2]
    return None


def _ref(value: Mapping[str, Any]) -> str | None:
    if "$ref" in value:
        return str(value["$ref"]).rsplit("/", 1)[-1]
    all_of = value.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and "$ref" in all_of[0]:
        return str(all_of[0]["$ref"]).rsplit("/", 1)[-1]
    return None


def _node(value: Mapping[str, Any]) -> dict[str, Any]:
    """A property: ``r`` the referenced type, or ``t`` its JSON type; ``i`` an array's items; ``a`` a map's
    values; ``d`` the zero value the round trip writes when the field is absent — kube-openapi's ``default``
    of a non-pointer struct (``{}``) or of a field without ``omitempty`` (``""``, ``0``, ``false``); an
    explicit non-zero default (``+default="TCP"``) is the API server's business, not the round trip's."""
    out: dict[str, Any] = {}
    ref = _ref(value)
    if ref:
        out["r"] = ref
    elif value.get("type"):
        out["t"] = value["type"]
    if value.get("type") == "array" and isinstance(value.get("items"), Mapping):
        out["i"] = _node(value["items"])
    if value.get("type") == "object" and isinstance(value.get("additionalProperties"), Mapping):
        out["a"] = _node(value["additionalProperties"])
    default = value.get("default")
    zeros: tuple[object, ...] = ({}, "", 0, False)
    if "default" in value and any(default == zero and type(default) is type(zero) for zero in zeros):
        out["d"] = default
    if value.get("x-kubernetes-preserve-unknown-fields"):
        out["u"] = 1
    return out


def _type(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A type: ``p`` its properties (absent: not a struct — a string, a number, an int-or-string, a
    free-form object), ``a`` a map's values, ``u`` unknown fields preserved."""
    out: dict[str, Any] = {}
    if isinstance(schema.get("properties"), Mapping):
        out["p"] = {k: _node(v) for k, v in sorted(schema["properties"].items())}
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        out["u"] = 1
    if isinstance(schema.get("additionalProperties"), Mapping):
        out["a"] = _node(schema["additionalProperties"])
    return out


def table_from_openapi(documents: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The table (``roots``: ``apiVersion/Kind`` → type; ``types``) from ``(path, OpenAPI v3 document)``
    pairs of an API server; paths that are not Kubernetes' own are skipped."""
    roots: dict[str, str] = {}
    types: dict[str, dict[str, Any]] = {}
    for path, document in documents:
        gv = builtin_group_version(path)
        if gv is None:
            continue
        for name, schema in ((document.get("components") or {}).get("schemas") or {}).items():
            types[name] = _type(schema)
            for prop in [p for (t, p) in _INT_OR_STRING_VALUES if t == name]:
                if prop in types[name].get("p", {}):
                    types[name]["p"][prop]["d"] = 0
            for gvk in schema.get("x-kubernetes-group-version-kind") or []:
                if (gvk.get("group", ""), gvk.get("version")) == gv:
                    key = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
                    roots[f"{key}/{gvk['kind']}"] = name
    keep: set[str] = set()  # only the types an object of a root kind can reach
    todo = list(roots.values())
    while todo:
        name = todo.pop()
        if name in keep or name not in types:
            continue
        keep.add(name)
        stack = [*types[name].get("p", {}).values(), *([types[name]["a"]] if "a" in types[name] else [])]
        while stack:
            node = stack.pop()
            if "r" in node:
                todo.append(node["r"])
            stack.extend(node[k] for k in ("i", "a") if k in node)
    return {"roots": dict(sorted(roots.items())), "types": {k: types[k] for k in sorted(keep)}}
