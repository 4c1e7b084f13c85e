"""Immutable fields (upstream ``kustomization_force_test.go``): without force the apply fails with the
dry-run error naming the object; with ``spec.force`` the object is deleted and recreated."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import deployment

pytestmark = pytest.mark.integration


async def test_immutable_change_fails_without_force_and_recreates_with_it(env: ControllerEnv) -> None:
    ns = env.namespace
    first = await env.publish({"deploy.yaml": deployment("web", app="v1")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    await env.wait_ready(revision=first["revision"])
    uid = (await env.get("apps/v1", "Deployment", "web"))["metadata"]["uid"]

    second = await env.publish({"deploy.yaml": deployment("web", app="v2")})
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "ReconciliationFailed"))
    message = condition_message(obj, "Ready")
    assert message.startswith(f"Deployment/{ns}/web dry-run failed (Invalid): "), message
    assert "field is immutable" in message
    assert obj["status"]["lastAttemptedRevision"] == second["revision"]
    assert obj["status"]["lastAppliedRevision"] == first["revision"]
    assert (await env.get("apps/v1", "Deployment", "web"))["metadata"]["uid"] == uid
    event = await env.wait_event(lambda e: e["type"] == "Warning")
    assert event["reason"] == "ReconciliationFailed"

    await env.patch_spec({"force": True})
    await env.wait_ready(revision=second["revision"])
    live = await env.get("apps/v1", "Deployment", "web")
    assert live["metadata"]["uid"] != uid
    assert live["spec"]["selector"]["matchLabels"] == {"app": "v2"}
    await env.wait_event(lambda e: e["message"] == f"Deployment/{ns}/web created")


async def test_force_annotation_on_one_object(env: ControllerEnv) -> None:
    ns = env.namespace
    first = await env.publish({"deploy.yaml": deployment("web", app="v1")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    await env.wait_ready(revision=first["revision"])
    uid = (await env.get("apps/v1", "Deployment", "web"))["metadata"]["uid"]
    await env.client.patch("apps/v1", "Deployment", "web", ns,
                           {"metadata": {"annotations": {"kustomize.toolkit.fluxcd.io/force": "enabled"}}},
                           patch_type="merge", field_manager="someone")
    second = await env.publish({"deploy.yaml": deployment("web", app="v2")})
    await env.wait_ready(revision=second["revision"])
    assert (await env.get("apps/v1", "Deployment", "web"))["metadata"]["uid"] != uid
