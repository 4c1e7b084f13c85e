"""Tenancy through impersonation (upstream ``kustomization_impersonation_test.go``) on an API server that
enforces RBAC: every tenant request runs as ``system:serviceaccount:<ns>:<sa>``; what the service account
may not do fails the reconcile; a missing service account at deletion leaves the objects alone."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


async def grant_configmaps(env: ControllerEnv, sa: str) -> None:
    ns = env.namespace
    await env.client.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                             "metadata": {"name": "configmaps", "namespace": ns},
                             "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]})
    await env.client.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                             "metadata": {"name": f"{sa}-configmaps", "namespace": ns},
                             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                         "name": "configmaps"},
                             "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]})


async def create_sa(env: ControllerEnv, name: str) -> None:
    await env.client.create({"apiVersion": "v1", "kind": "ServiceAccount",
                             "metadata": {"name": name, "namespace": env.namespace}})


async def test_denied_then_allowed(env: ControllerEnv) -> None:
    server = env.server
    server.options.rbac = True
    ns = env.namespace
    await create_sa(env, "tenant")
    artifact = await env.publish({"cm.yaml": configmap("a")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, serviceAccountName="tenant"))
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "ReconciliationFailed"))
    message = condition_message(obj, "Ready")
    assert message.startswith(f"ConfigMap/{ns}/a "), message
    assert f'User "system:serviceaccount:{ns}:tenant" cannot' in message
    assert not await env.exists("v1", "ConfigMap", "a")

    await grant_configmaps(env, "tenant")
    server.requests.clear()
    token = await env.request_reconcile()
    await env.wait_handled(token)
    await env.wait_ready(revision=artifact["revision"])
    writes = server.requests.select(resource="configmaps", writes_only=True, include_dry_run=True)
    assert writes
    assert {w.user for w in writes} == {f"system:serviceaccount:{ns}:tenant"}


async def test_default_service_account_flag(env: ControllerEnv) -> None:
    env.server.options.rbac = True
    ns = env.namespace
    await create_sa(env, "fallback")
    artifact = await env.publish({"cm.yaml": configmap("a")})
    await env.start(default_service_account="fallback")
    await env.create(env.kustomization(targetNamespace=ns))
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "ReconciliationFailed"))
    assert f"system:serviceaccount:{ns}:fallback" in condition_message(obj, "Ready")
    await grant_configmaps(env, "fallback")
    await env.request_reconcile()
    await env.wait_ready(revision=artifact["revision"])


async def test_deletion_with_missing_service_account_keeps_objects(env: ControllerEnv) -> None:
    env.server.options.rbac = True
    ns = env.namespace
    await create_sa(env, "tenant")
    await grant_configmaps(env, "tenant")
    artifact = await env.publish({"cm.yaml": configmap("a")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, serviceAccountName="tenant"))
    await env.wait_ready(revision=artifact["revision"])
    await env.client.delete("v1", "ServiceAccount", "tenant", ns)
    await env.delete_ks()
    await env.wait_gone()
    assert await env.exists("v1", "ConfigMap", "a")
    event = await env.wait_event(lambda e: e["type"] == "Warning")
    assert event["message"] == f"unable to prune objects: \nConfigMap/{ns}/a"


async def test_health_checks_and_prune_run_as_the_tenant(env: ControllerEnv) -> None:
    server = env.server
    server.options.rbac = True
    ns = env.namespace
    tenant = f"system:serviceaccount:{ns}:tenant"
    await create_sa(env, "tenant")
    await grant_configmaps(env, "tenant")
    first = await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, serviceAccountName="tenant", healthChecks=[
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "namespace": ns}]))
    obj = await env.wait_ready(revision=first["revision"])
    assert condition(obj, "Healthy") == ("True", "Succeeded")
    server.requests.clear()
    second = await env.publish({"a.yaml": configmap("a")})
    await env.wait_ready(revision=second["revision"])
    assert not await env.exists("v1", "ConfigMap", "b")
    deletes = server.requests.select(verb="delete", resource="configmaps", name="b")
    assert [d.user for d in deletes] == [tenant]
    health_reads = server.requests.select(verb="get", resource="configmaps", name="a")
    assert health_reads and {r.user for r in health_reads} == {tenant}
