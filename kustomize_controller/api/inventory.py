"""Inventory entries and the object id format ``<namespace>_<name>_<group>_<kind>``.

Contract (the format of Flux ``cli-utils`` ``ObjMetadata``, stored in ``status.inventory``):

- A cluster-scoped object has an empty namespace (``_my-ns__Namespace``); the core group is empty
  (``default_podinfo__Service``).
- RBAC objects (Role, ClusterRole, RoleBinding, ClusterRoleBinding of ``rbac.authorization.k8s.io``)
  may have ``:`` in their names (``system:metrics-server``); it is written as ``__`` and read back.
- ``parse_inventory_id(format_inventory_id(x)) == x`` for every valid ``ObjectId``.
- ``ResourceRef.v`` is the API *version* only (``v1``, ``v2``), not group/version.

Not promised: ``format_inventory_id`` does not validate names; an ``_`` in a name (invalid in
Kubernetes) produces an id that ``parse_inventory_id`` rejects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kustomize_controller.api.base import ApiModel

__all__ = [
    "InventoryIdError",
    "ObjectId",
    "ResourceInventory",
    "ResourceRef",
    "format_inventory_id",
    "parse_inventory_id",
]

_SEP: Final = "_"
_COLON_ESCAPE: Final = "__"
_RBAC_GROUP: Final = "rbac.authorization.k8s.io"
_RBAC_KINDS: Final = frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})


class InventoryIdError(ValueError):
    """An inventory id that does not have the ``<namespace>_<name>_<group>_<kind>`` shape."""


@dataclass(frozen=True, slots=True)
class ObjectId:
    """The identity of a Kubernetes object, independent of its API version."""

    namespace: str
    name: str
    group: str
    kind: str

    def __str__(self) -> str:
        return format_inventory_id(self)


def _is_rbac(group: str, kind: str) -> bool:
    return group == _RBAC_GROUP and kind in _RBAC_KINDS


def format_inventory_id(obj_id: ObjectId) -> str:
    """The inventory id of ``obj_id``."""
    name = obj_id.name
    if _is_rbac(obj_id.group, obj_id.kind):
        name = name.replace(":", _COLON_ESCAPE)
    return f"{obj_id.namespace}{_SEP}{name}{_SEP}{obj_id.group}{_SEP}{obj_id.kind}"


def parse_inventory_id(text: str) -> ObjectId:
    """Parse an inventory id; raises ``InventoryIdError`` when it has the wrong shape."""
    # Namespace is the first field, kind the last, group the one before; the name is what is left
    # and is the only field that may contain the separator (RBAC ``:`` escaped as ``__``).
    namespace, sep, rest = text.partition(_SEP)
    if not sep:
        raise InventoryIdError(f'invalid inventory id "{text}": expected <namespace>_<name>_<group>_<kind>')
    rest, sep, kind = rest.rpartition(_SEP)
    if not sep:
        raise InventoryIdError(f'invalid inventory id "{text}": expected <namespace>_<name>_<group>_<kind>')
    name, sep, group = rest.rpartition(_SEP)
    if not sep:
        raise InventoryIdError(f'invalid inventory id "{text}": expected <namespace>_<name>_<group>_<kind>')
    if _is_rbac(group, kind):
        name = name.replace(_COLON_ESCAPE, ":")
    if _SEP in name:
        raise InventoryIdError(f'invalid inventory id "{text}": too many fields')
    if not name or not kind:
        raise InventoryIdError(f'invalid inventory id "{text}": empty name or kind')
    return ObjectId(namespace=namespace, name=name, group=group, kind=kind)


class ResourceRef(ApiModel):
    """One inventory entry."""

    id: str
    """The object id, '<namespace>_<name>_<group>_<kind>'."""
    v: str
    """The API version of the object's kind (without the group)."""

    @classmethod
    def of(cls, obj_id: ObjectId, version: str) -> ResourceRef:
        return cls(id=format_inventory_id(obj_id), v=version)

    def object_id(self) -> ObjectId:
        return parse_inventory_id(self.id)

    def api_version(self) -> str:
        """The full apiVersion (``group/version``, or ``version`` for the core group)."""
        group = self.object_id().group
        return f"{group}/{self.v}" if group else self.v


class ResourceInventory(ApiModel):
    """The objects applied by the last successful reconcile, in apply order."""

    entries: list[ResourceRef]
    """The applied objects."""
