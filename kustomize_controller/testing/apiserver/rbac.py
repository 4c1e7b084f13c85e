"""RBAC authorisation over the stored Roles, ClusterRoles and their bindings.

Contract: a request is allowed when a rule of a role bound to the user (by name, group, or service account)
matches its verb, API group, resource (``resource/subresource`` for subresources), resource name (a rule
with ``resourceNames`` never matches list/watch/create requests without a name) and namespace (RoleBindings
grant only in their namespace; ClusterRoleBindings everywhere). Members of ``system:masters`` are always
allowed. Every authenticated user may read discovery (``/api``, ``/apis``, ``/version``, ``/openapi``), as
the default ``system:discovery`` binding grants. Aggregated ClusterRoles are not resolved.

Cost: linear in the bindings of the request's namespace plus the ClusterRoleBindings (no object scans).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .auth import UserInfo
from .storage import Storage

_RBAC = "rbac.authorization.k8s.io"
_DISCOVERY_PREFIXES = ("/api", "/apis", "/version", "/openapi", "/healthz", "/livez", "/readyz")


@dataclass(frozen=True)
class Attributes:
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    path: str = ""
    resource_request: bool = True


def _subject_matches(subject: dict[str, Any], user: UserInfo, binding_ns: str) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        return bool(subject.get("name") == user.name)
    if kind == "Group":
        return subject.get("name") in user.groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return user.name == f"system:serviceaccount:{ns}:{subject.get('name')}"
    return False


def _rule_allows(rule: dict[str, Any], attrs: Attributes) -> bool:
    verbs = rule.get("verbs") or []
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    if not attrs.resource_request:
        urls = rule.get("nonResourceURLs") or []
        return any(u == "*" or u == attrs.path or (u.endswith("*") and attrs.path.startswith(u[:-1]))
                   for u in urls)
    groups = rule.get("apiGroups")
    if groups is None or ("*" not in groups and attrs.group not in groups):
        return False
    wanted = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    resources = rule.get("resources") or []
    if not any(r in ("*", wanted) or (attrs.subresource and r == f"*/{attrs.subresource}") for r in resources):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


class Authorizer:
    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    def _rules(self, ref: dict[str, Any], binding_ns: str) -> list[dict[str, Any]]:
        if ref.get("kind") == "ClusterRole":
            role = self._storage.get((_RBAC, "clusterroles"), "", ref.get("name", ""))
        else:
            role = self._storage.get((_RBAC, "roles"), binding_ns, ref.get("name", ""))
        return list((role or {}).get("rules") or [])

    def allowed(self, user: UserInfo, attrs: Attributes) -> bool:
        if user.is_admin:
            return True
        if not attrs.resource_request and attrs.verb == "get":
            if user.anonymous:
                return attrs.path.startswith(("/version", "/healthz", "/livez", "/readyz"))
            if attrs.path.startswith(_DISCOVERY_PREFIXES):
                return True
        bindings: list[tuple[dict[str, Any], str]] = [
            (b, "") for b in self._storage.iterate((_RBAC, "clusterrolebindings"), None)]
        if attrs.namespace:
            bindings += [(b, attrs.namespace)
                         for b in self._storage.iterate((_RBAC, "rolebindings"), attrs.namespace)]
        for binding, ns in bindings:
            if not any(_subject_matches(s, user, ns) for s in binding.get("subjects") or []):
                continue
            for rule in self._rules(binding.get("roleRef") or {}, ns):
                if _rule_allows(rule, attrs):
                    return True
        return False

    def may_impersonate(self, user: UserInfo, verb: str, resource: str, name: str) -> bool:
        group = "authentication.k8s.io" if resource == "uids" else ""
        return self.allowed(user, Attributes(verb, group, resource, "", "", name))


def forbidden_message(user: UserInfo, attrs: Attributes) -> str:
    if not attrs.resource_request:
        return f'User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    return f'User "{user.name}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.group}" {scope}'
