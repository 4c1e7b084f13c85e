"""Source references across namespaces (upstream ``kustomization_acl_test.go``): allowed by default,
refused terminally with ``--no-cross-namespace-refs``."""

from __future__ import annotations

import pytest

from kustomize_controller.testing.artifacts import publish_source
from tests.integration.controller.conftest import ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


async def publish_elsewhere(env: ControllerEnv, namespace: str) -> dict:  # type: ignore[type-arg]
    await env.create_namespace(namespace)
    artifact = await env.artifacts.publish_files({"cm.yaml": configmap("a")}, name=f"{namespace}/shared")
    await publish_source(env.client, namespace=namespace, name="shared", artifact=artifact)
    return dict(artifact)


async def test_cross_namespace_source_allowed_by_default(env: ControllerEnv) -> None:
    other = f"{env.namespace}-src"
    artifact = await publish_elsewhere(env, other)
    await env.start(watch_all_namespaces=True)
    await env.create(env.kustomization(targetNamespace=env.namespace,
                                       sourceRef={"kind": "GitRepository", "name": "shared", "namespace": other}))
    await env.wait_ready(revision=artifact["revision"])


async def test_cross_namespace_source_blocked(env: ControllerEnv) -> None:
    other = f"{env.namespace}-src"
    await publish_elsewhere(env, other)
    await env.start(no_cross_namespace_refs=True, watch_all_namespaces=True)
    await env.create(env.kustomization(targetNamespace=env.namespace,
                                       sourceRef={"kind": "GitRepository", "name": "shared", "namespace": other}))
    obj = await env.wait_for("app", lambda o: condition(o, "Stalled") == ("True", "AccessDenied"))
    expected = f"can't access 'GitRepository/{other}/shared', cross-namespace references have been blocked"
    assert condition(obj, "Ready") == ("False", "AccessDenied")
    assert condition_message(obj, "Ready") == expected
    assert condition_message(obj, "Stalled") == expected
    assert condition(obj, "Reconciling") is None
    assert not await env.exists("v1", "ConfigMap", "a")
    event = await env.wait_event(lambda e: e["type"] == "Warning")
    assert (event["reason"], event["message"]) == ("AccessDenied", expected)
