"""Unknown-field detection for built-in kinds, from the typed models of ``kubernetes_asyncio``.

A real server decodes built-in objects into Go structs, so fields the type does not declare are dropped
(reported as a warning, or rejected with ``fieldValidation=Strict``; server-side apply rejects them). The
``kubernetes_asyncio`` client (generated from the same OpenAPI document, version-matched to the API) has
one model class per type with ``openapi_types`` and ``attribute_map``; walking an object along them finds
the undeclared fields. Only the *names* are checked: value types are not (the models type quantities as
strings where the server also accepts numbers).

The models are imported on first use (about a second, once per process).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from .kinds import ResourceType

_LIST = re.compile(r"^list\[(.+)\]$")
_DICT = re.compile(r"^dict\(str, (.+)\)$")
_TOP_LEVEL = ("apiVersion", "kind")


@cache
def _models() -> Any:
    from kubernetes_asyncio.client import models

    return models


def model_name(rt: ResourceType) -> str:
    version = rt.version[:1].upper() + rt.version[1:]
    if rt.kind == "Event":
        return f"Events{version}Event" if rt.group == "events.k8s.io" else f"Core{version}Event"
    return f"{version}{rt.kind}"


@cache
def _fields(class_name: str) -> dict[str, str] | None:
    """JSON field name -> type string of a model class (None when there is no such class)."""
    cls = getattr(_models(), class_name, None)
    if cls is None or not hasattr(cls, "openapi_types"):
        return None
    return {cls.attribute_map[attr]: type_ for attr, type_ in cls.openapi_types.items()}


def known(rt: ResourceType) -> bool:
    return not rt.custom and _fields(model_name(rt)) is not None


def prune(rt: ResourceType, obj: dict[str, Any], unknown: list[str]) -> dict[str, Any]:
    """``obj`` without fields its type does not declare; their paths are appended to ``unknown``."""
    fields = _fields(model_name(rt))
    if fields is None:
        return obj
    result = _walk_model(model_name(rt), obj, "", unknown)
    return result if isinstance(result, dict) else obj


def prune_metadata(meta: dict[str, Any], unknown: list[str]) -> dict[str, Any]:
    result = _walk_model("V1ObjectMeta", meta, "metadata", unknown)
    return result if isinstance(result, dict) else meta


def _walk_model(class_name: str, value: Any, path: str, unknown: list[str]) -> Any:
    fields = _fields(class_name)
    if fields is None or not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, child in value.items():
        child_path = f"{path}.{key}" if path else key
        type_ = fields.get(key)
        if type_ is None:
            unknown.append(child_path)
            continue
        out[key] = _walk_type(type_, child, child_path, unknown)
    return out


def _walk_type(type_: str, value: Any, path: str, unknown: list[str]) -> Any:
    if value is None:
        return None
    if (m := _LIST.match(type_)) is not None:
        if not isinstance(value, list):
            return value
        return [_walk_type(m.group(1), item, f"{path}[{i}]", unknown) for i, item in enumerate(value)]
    if (m := _DICT.match(type_)) is not None:
        if not isinstance(value, dict):
            return value
        return {k: _walk_type(m.group(1), v, f"{path}.{k}", unknown) for k, v in value.items()}
    if type_[:1].isupper():
        return _walk_model(type_, value, path, unknown)
    return value


__all__ = ["known", "model_name", "prune", "prune_metadata"]
