"""Authentication, impersonation and RBAC authorisation."""

from __future__ import annotations

import asyncio
import ssl

import aiohttp
import pytest

from .helpers import call, cm_path, configmap

pytestmark = pytest.mark.integration


async def test_missing_or_wrong_token_is_unauthorized(cluster):
    # no client certificate: a real cluster's kubeconfig often authenticates with one, and a valid
    # certificate would authenticate the request whatever the token says
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    async with aiohttp.ClientSession(cluster.url, headers={"Authorization": "Bearer not-a-token"},
                                     connector=aiohttp.TCPConnector(ssl=context)) as http:
        status, body = await call(http, "GET", "/api/v1/namespaces")
        assert (status, body["reason"]) == (401, "Unauthorized")


async def test_anonymous_requests_are_forbidden_when_anonymous_auth_is_on():
    from kustomize_controller.testing.apiserver import ApiServer

    async with ApiServer(anonymous_auth=True) as server:
        connector = aiohttp.TCPConnector(ssl=server.ssl_context())
        async with aiohttp.ClientSession(server.url, connector=connector) as http:
            status, body = await call(http, "GET", "/api/v1/namespaces/default/configmaps")
            assert (status, body["reason"]) == (403, "Forbidden")
            assert body["message"] == ('configmaps is forbidden: User "system:anonymous" cannot list resource '
                                       '"configmaps" in API group "" in the namespace "default"')
            status, _ = await call(http, "GET", "/version")
            assert status == 200
    async with ApiServer() as server:
        connector = aiohttp.TCPConnector(ssl=server.ssl_context())
        async with aiohttp.ClientSession(server.url, connector=connector) as http:
            status, _ = await call(http, "GET", "/api/v1/namespaces")
            assert status == 401


async def _grant_configmap_reader(http, ns: str, sa: str) -> None:
    status, body = await call(http, "POST", f"/api/v1/namespaces/{ns}/serviceaccounts", body={
        "metadata": {"name": sa}})
    assert status == 201, body
    status, body = await call(http, "POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles", body={
        "metadata": {"name": "cm-reader"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
                  {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["one"]}]})
    assert status == 201, body
    status, body = await call(http, "POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
                              body={"metadata": {"name": "cm-reader"},
                                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                "name": "cm-reader"},
                                    "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]})
    assert status == 201, body


async def test_impersonated_service_account_is_authorised_by_rbac(cluster):
    if cluster.server is not None:
        cluster.server.options.rbac = True
    ns = cluster.namespace
    user = f"system:serviceaccount:{ns}:reader"
    async with cluster.session() as http:
        await _grant_configmap_reader(http, ns, "reader")
        await call(http, "POST", cm_path(ns), body=configmap("visible"))
        as_sa = {"Impersonate-User": user}
        for _ in range(100):  # a real server's RBAC authorizer sees a new binding through its informer
            status, body = await call(http, "GET", cm_path(ns, "visible"), headers=as_sa)
            if status != 403:
                break
            await asyncio.sleep(0.1)
        assert status == 200, body
        status, body = await call(http, "GET", cm_path(ns), headers=as_sa)
        assert status == 200
        status, body = await call(http, "POST", cm_path(ns), body=configmap("nope"), headers=as_sa)
        assert (status, body["reason"]) == (403, "Forbidden")
        assert body["message"] == (f'configmaps is forbidden: User "{user}" cannot create resource "configmaps" '
                                   f'in API group "" in the namespace "{ns}"')
        status, body = await call(http, "GET", f"/api/v1/namespaces/{ns}/secrets/two", headers=as_sa)
        assert status == 403
        assert body["message"] == (f'secrets "two" is forbidden: User "{user}" cannot get resource "secrets" '
                                   f'in API group "" in the namespace "{ns}"')
        status, body = await call(http, "GET", f"/api/v1/namespaces/{ns}/secrets/one", headers=as_sa)
        assert status == 404  # allowed by resourceNames, then simply absent
        status, body = await call(http, "GET", "/api/v1/namespaces", headers=as_sa)
        assert status == 403
        assert body["message"].endswith('cannot list resource "namespaces" in API group "" at the cluster scope')


async def test_impersonation_needs_permission(cluster):
    server = cluster.require_server()
    server.options.rbac = True
    token = server.add_user("jane")
    async with cluster.session(headers={"Authorization": f"Bearer {token}"}) as http:
        status, body = await call(http, "GET", cm_path(cluster.namespace), headers={"Impersonate-User": "bob"})
        assert status == 403
        assert body["message"] == ('users "bob" is forbidden: User "jane" cannot impersonate resource "users" in '
                                   'API group "" at the cluster scope')
        status, _ = await call(http, "GET", "/apis")
        assert status == 200  # discovery is open to every authenticated user
