from __future__ import annotations

import pytest

from kustomize_controller.testing.apiserver.auth import UserInfo
from kustomize_controller.testing.apiserver.errors import ApiStatusError
from kustomize_controller.testing.apiserver.kinds import Registry
from kustomize_controller.testing.apiserver.rbac import Attributes, Authorizer, forbidden_message
from kustomize_controller.testing.apiserver.routing import Discovery, Target, parse
from kustomize_controller.testing.apiserver.storage import Storage

RBAC = "rbac.authorization.k8s.io"


def _put(storage, plural, name, ns="", **body):
    storage.put((RBAC, plural), {"metadata": {"name": name, **({"namespace": ns} if ns else {})}, **body})


@pytest.fixture
def authorizer():
    storage = Storage()
    _put(storage, "roles", "reader", "ns", rules=[
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
        {"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["one"]}])
    _put(storage, "rolebindings", "reader", "ns", roleRef={"kind": "Role", "name": "reader"},
         subjects=[{"kind": "ServiceAccount", "name": "sa"}])
    _put(storage, "clusterroles", "ns-viewer", rules=[{"apiGroups": ["*"], "resources": ["namespaces"],
                                                      "verbs": ["*"]}])
    _put(storage, "clusterrolebindings", "ns-viewer", roleRef={"kind": "ClusterRole", "name": "ns-viewer"},
         subjects=[{"kind": "Group", "name": "viewers"}])
    return Authorizer(storage)


SA = UserInfo("system:serviceaccount:ns:sa", ("system:serviceaccounts", "system:authenticated"))


@pytest.mark.parametrize(("user", "attrs", "allowed"), [
    (SA, Attributes("get", "", "configmaps", "", "ns", "x"), True),
    (SA, Attributes("list", "", "configmaps", "", "ns", ""), True),
    (SA, Attributes("create", "", "configmaps", "", "ns", ""), False),
    (SA, Attributes("get", "", "configmaps", "", "other", "x"), False),
    (SA, Attributes("patch", "apps", "deployments", "status", "ns", "d"), True),
    (SA, Attributes("patch", "apps", "deployments", "", "ns", "d"), False),
    (SA, Attributes("get", "", "secrets", "", "ns", "one"), True),
    (SA, Attributes("get", "", "secrets", "", "ns", "two"), False),
    (SA, Attributes("list", "", "secrets", "", "ns", ""), False),
    (UserInfo("u", ("viewers",)), Attributes("delete", "", "namespaces", "", "", "n"), True),
    (UserInfo("admin", ("system:masters",)), Attributes("delete", "x", "y", "", "", "n"), True),
    (UserInfo("u", ()), Attributes("get", "", "", "", "", "", "/apis", resource_request=False), True),
])
def test_rbac_decisions(authorizer, user, attrs, allowed):
    assert authorizer.allowed(user, attrs) is allowed


def test_forbidden_message_shapes():
    assert forbidden_message(SA, Attributes("list", "apps", "deployments", "", "ns", "")) == (
        'User "system:serviceaccount:ns:sa" cannot list resource "deployments" in API group "apps" in the '
        'namespace "ns"')
    assert forbidden_message(SA, Attributes("get", "", "nodes", "", "", "n")).endswith("at the cluster scope")


def test_routing():
    registry = Registry()
    target = parse(registry, "/api/v1/namespaces/ns/configmaps/x")
    assert isinstance(target, Target)
    assert (target.rt.plural, target.namespace, target.name, target.subresource) == ("configmaps", "ns", "x", "")
    ns_status = parse(registry, "/api/v1/namespaces/ns/status")
    assert isinstance(ns_status, Target) and (ns_status.rt.kind, ns_status.subresource) == ("Namespace", "status")
    all_ns = parse(registry, "/apis/apps/v1/deployments")
    assert isinstance(all_ns, Target) and all_ns.namespace is None and all_ns.name is None
    assert parse(registry, "/apis") == Discovery(None, None)
    assert parse(registry, "/apis/apps") == Discovery("apps", None)
    for bad in ("/api/v2", "/apis/nope/v1", "/api/v1/namespaces/ns/nope", "/api/v1/configmaps/x",
                "/api/v1/namespaces/ns/namespaces", "/api/v1/namespaces/ns/configmaps/x/status"):
        with pytest.raises(ApiStatusError) as info:
            parse(registry, bad)
        assert info.value.code == 404, bad
