"""URL parsing: which resource, namespace, name and subresource a Kubernetes API path addresses.

Paths: ``/api/v1/...`` for the core group and ``/apis/{group}/{version}/...`` for the others, then
``namespaces/{ns}/{resource}[/{name}[/{subresource}]]`` for namespaced resources or
``{resource}[/{name}[/{subresource}]]`` for cluster-scoped ones and for lists/watches across all namespaces.
``namespaces/{name}/status`` and ``namespaces/{name}/finalize`` address a Namespace's subresources;
``serviceaccounts/{name}/token`` is the TokenRequest subresource (``tokens.py``).
A ``watch/`` segment before them is the deprecated watch path (``/api/v1/watch/namespaces/ns/configmaps/x``
watches that one object); ``?watch=true`` on an object's own path is a plain GET, as on a real server.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import errors
from .kinds import Registry, ResourceType

_NAMESPACE_SUBRESOURCES = {"status", "finalize"}


@dataclass(frozen=True)
class Target:
    rt: ResourceType
    namespace: str | None  # None: cluster-scoped object, or a list/watch across all namespaces
    name: str | None
    subresource: str
    watch_path: bool = False  # reached through the deprecated /watch/ prefix


@dataclass(frozen=True)
class Discovery:
    group: str | None  # None: the /apis group list; "" the core group
    version: str | None


def parse(registry: Registry, path: str) -> Target | Discovery:
    parts = [p for p in path.split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        raise errors.page_not_found()
    if parts[0] == "api":
        group = ""
        rest = parts[1:]
        if not rest:
            return Discovery("", None)
        version, rest = rest[0], rest[1:]
    else:
        if len(parts) == 1:
            return Discovery(None, None)
        group = parts[1]
        if len(parts) == 2:
            if not registry.group_exists(group):
                raise errors.page_not_found()
            return Discovery(group, None)
        version, rest = parts[2], parts[3:]
    if not registry.version_exists(group, version):
        raise errors.page_not_found()
    if not rest:
        return Discovery(group, version)
    watch_path = rest[0] == "watch" and len(rest) > 1
    if watch_path:
        rest = rest[1:]
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in _NAMESPACE_SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else ""
    if len(rest) > 3:
        raise errors.page_not_found()
    rt = registry.lookup(group, version, plural)
    if rt is None:
        raise errors.page_not_found()
    if namespace is not None and not rt.namespaced:
        raise errors.page_not_found()
    if rt.namespaced and namespace is None and name is not None:
        raise errors.page_not_found()
    if subresource and not ((subresource == "status" and rt.has_status) or (
            subresource == "finalize" and rt.kind == "Namespace" and not rt.group) or (
            subresource == "token" and rt.kind == "ServiceAccount" and not rt.group)):
        raise errors.page_not_found()
    if watch_path and subresource:
        raise errors.page_not_found()
    return Target(rt, namespace, name, subresource, watch_path)
