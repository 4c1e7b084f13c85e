"""Identity and metadata helpers for unstructured Kubernetes objects (plain ``dict``s).

Contract:
- An object is a ``dict`` as decoded from JSON/YAML; helpers never mutate their input unless the name
  says so (``set_*``).
- ``ObjRef`` is the identity the apply engine works with: API group, kind, namespace, name — the version
  is deliberately not part of it (as in cli-utils ``ObjMetadata``), so an object served under a new
  version is still the same object.
- ``str(ref)`` is the upstream subject format ``Kind/namespace/name`` (``Kind/name`` when cluster-scoped);
  every error about an object starts with it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

Object = dict[str, Any]


def split_api_version(api_version: str) -> tuple[str, str]:
    """``apps/v1`` → (``apps``, ``v1``); ``v1`` → (``""``, ``v1``)."""
    group, sep, version = api_version.rpartition("/")
    return (group, version) if sep else ("", api_version)


def join_api_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


@dataclass(frozen=True, order=False, slots=True)
class ObjRef:
    """The identity of an object: group, kind, namespace ("" when cluster-scoped) and name."""

    group: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def from_object(cls, obj: Object) -> ObjRef:
        group, _ = split_api_version(str(obj.get("apiVersion") or ""))
        meta = metadata(obj)
        return cls(
            group=group,
            kind=str(obj.get("kind") or ""),
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
        )

    def __str__(self) -> str:
        if self.namespace:
            return f"{self.kind}/{self.namespace}/{self.name}"
        return f"{self.kind}/{self.name}"


def metadata(obj: Object) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def get_labels(obj: Object) -> dict[str, str]:
    value = metadata(obj).get("labels")
    return value if isinstance(value, dict) else {}


def get_annotations(obj: Object) -> dict[str, str]:
    value = metadata(obj).get("annotations")
    return value if isinstance(value, dict) else {}


def api_version(obj: Object) -> str:
    return str(obj.get("apiVersion") or "")


def version_of(obj: Object) -> str:
    return split_api_version(api_version(obj))[1]


def resource_version(obj: Object) -> str:
    return str(metadata(obj).get("resourceVersion") or "")


def uid(obj: Object) -> str:
    return str(metadata(obj).get("uid") or "")


def fmt(obj: Object) -> str:
    """``Kind/namespace/name`` of an object."""
    return str(ObjRef.from_object(obj))


def deep_copy(obj: Object) -> Object:
    return copy.deepcopy(obj)


def set_labels(obj: Object, values: dict[str, str]) -> None:
    """Merge ``values`` into the object's labels (creating the map), overriding same keys."""
    if not values:
        return
    meta = obj.setdefault("metadata", {})
    current = meta.get("labels")
    if not isinstance(current, dict):
        current = {}
        meta["labels"] = current
    current.update(values)


def set_annotations(obj: Object, values: dict[str, str]) -> None:
    """Merge ``values`` into the object's annotations (creating the map), overriding same keys."""
    if not values:
        return
    meta = obj.setdefault("metadata", {})
    current = meta.get("annotations")
    if not isinstance(current, dict):
        current = {}
        meta["annotations"] = current
    current.update(values)


def semantic_equal(a: Any, b: Any) -> bool:
    """Deep equality with the rules of apimachinery's ``equality.Semantic.DeepEqual`` on JSON values.

    Maps and lists compare element-wise; a JSON ``null`` is not equal to an empty map or list (in an
    unstructured object they are different values); ``True`` is not ``1``; ``1`` equals ``1.0`` only
    when both are numbers of the same JSON kind (integers vs. floats differ, as int64 vs. float64 do).
    """
    if isinstance(a, dict):
        if not isinstance(b, dict) or a.keys() != b.keys():
            return False
        return all(semantic_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return False
        return all(semantic_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if (isinstance(a, int) and isinstance(b, float)) or (isinstance(a, float) and isinstance(b, int)):
        return False
    return bool(a == b)


def maps_equal(a: dict[str, str] | None, b: dict[str, str] | None) -> bool:
    """Label/annotation maps: a missing map equals an empty one (Go's nil map vs empty map rule)."""
    return semantic_equal(a or {}, b or {})
