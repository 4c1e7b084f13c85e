"""The change gate with the rest (docs/change-management.md "How the gates compose"): drift that
``drift-detection: warn`` keeps needs no approval; a dependent waits for its dependency's applied revision;
health checks run after an approved plan; deleting a Kustomization is not gated; an old API version
carries the annotations through conversion."""

from __future__ import annotations

import pytest

from kustomize_controller.api.changes import APPROVAL_ANNOTATION
from kustomize_controller.api.drift import DRIFT_DETECTION_ANNOTATION
from kustomize_controller.reconcile.gate.plan import plan_id_in
from tests.integration.controller.conftest import KS_API, ControllerEnv, condition, condition_message
from tests.integration.controller.test_approval import (
    approve_annotation,
    files,
    mode_of,
    pending,
    start_manual,
)
from tests.integration.controller.test_conversion_webhook import start_with_webhook

pytestmark = pytest.mark.integration


async def test_drift_kept_by_warn_mode_needs_no_approval(env: ControllerEnv) -> None:
    await start_manual(env, files("safe", "a"))
    await env.client.patch(KS_API, "Kustomization", "app", env.namespace,
                           {"metadata": {"annotations": {DRIFT_DETECTION_ANNOTATION: "warn"}}}, patch_type="merge")
    await env.client.patch("v1", "ConfigMap", "a", env.namespace, {"data": {"mode": "hotfix"}}, patch_type="merge",
                           field_manager="kubectl-edit")
    obj = await env.wait_handled(await env.request_reconcile())
    assert condition(obj, "Approved") == ("True", "NoChanges")
    assert condition(obj, "Drifted") == ("True", "DriftDetected")
    assert await mode_of(env, "a") == "hotfix"
    # a new desired state is a change: it waits for approval, then replaces the hot-fix
    second = await env.publish(files("fast", "a"))
    obj = await pending(env, second["revision"])
    assert "(1 configured)" in condition_message(obj, "Approved")
    await approve_annotation(env, plan_id_in(condition_message(obj, "Approved")))
    await env.wait_ready(revision=second["revision"])
    assert await mode_of(env, "a") == "fast"


async def test_a_dependent_waits_for_the_approved_revision_and_health_checks_run_after_approval(
    env: ControllerEnv,
) -> None:
    ns = env.namespace
    tree = {"first/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: first\ndata:\n  v: '1'\n",
            "second/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: second\n"}
    artifact = await env.publish(tree)
    await env.start()
    first = env.kustomization("first", path="./first", targetNamespace=ns, wait=True)
    first["metadata"]["annotations"] = {APPROVAL_ANNOTATION: "manual"}
    await env.create(first)
    await env.create(env.kustomization("second", path="./second", targetNamespace=ns, dependsOn=[{"name": "first"}]))
    obj = await env.wait_for("first", lambda o: condition(o, "Approved") == ("False", "ApprovalRequired"))
    await env.wait_for("second", lambda o: condition(o, "Ready") == ("False", "DependencyNotReady"))
    await approve_annotation(env, plan_id_in(condition_message(obj, "Approved")), "first")
    obj = await env.wait_ready("first", revision=artifact["revision"])
    assert condition(obj, "Healthy") == ("True", "Succeeded")
    await env.wait_ready("second", revision=artifact["revision"])

    tree["first/cm.yaml"] = tree["first/cm.yaml"].replace("'1'", "'2'")
    newer = await env.publish(tree)
    obj = await env.wait_for("first", lambda o: condition(o, "Approved") == ("False", "ApprovalRequired")
                             and newer["revision"] in condition_message(o, "Approved"))
    dependent = await env.wait_for("second", lambda o: condition(o, "Ready") == ("False", "DependencyNotReady"))
    assert "revision" in condition_message(dependent, "Ready")
    await approve_annotation(env, plan_id_in(condition_message(obj, "Approved")), "first")
    await env.wait_ready("first", revision=newer["revision"])
    await env.wait_ready("second", revision=newer["revision"])


async def test_deleting_is_not_gated(env: ControllerEnv) -> None:
    await start_manual(env, files("safe", "a"))
    second = await env.publish(files("fast", "a"))
    await pending(env, second["revision"])
    await env.delete_ks()
    await env.wait_gone()
    assert not await env.exists("v1", "ConfigMap", "a")  # pruned by the finalizer, no approval asked


async def test_an_old_api_version_carries_the_gate(env: ControllerEnv) -> None:
    env.cluster.require_server()  # the conversion webhook listens on loopback
    artifact = await env.publish(files("safe", "a"))
    await start_with_webhook(env)
    old = "kustomize.toolkit.fluxcd.io/v1beta2"
    await env.client.create({
        "apiVersion": old, "kind": "Kustomization",
        "metadata": {"name": "app", "namespace": env.namespace, "annotations": {APPROVAL_ANNOTATION: "manual"}},
        "spec": {"interval": "10m", "prune": True, "targetNamespace": env.namespace,
                 "sourceRef": {"kind": "GitRepository", "name": "repo"}},
    })
    obj = await pending(env, artifact["revision"])
    await env.client.patch(old, "Kustomization", "app", env.namespace,
                           {"metadata": {"annotations": {"kustomize.toolkit.fluxcd.io/approved-plan":
                                                         plan_id_in(condition_message(obj, "Approved"))}}},
                           patch_type="merge")
    await env.wait_ready(revision=artifact["revision"])
    assert await mode_of(env, "a") == "safe"
