"""Feature gate ``CancelHealthCheckOnNewRevision`` (upstream §5.10): a new enqueue of the object while it
waits on health checks cancels the wait — Ready=False ``HealthCheckCanceled`` "New reconciliation
triggered by <Kind>/<ns>/<name>", a Normal event, and an immediate requeue that picks up the change. The
waits here have a 5-minute timeout, so only a cancellation lets the tests finish."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv, condition
from tests.integration.controller.manifests import configmap, deployment

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("wait_mode")]  # both health-wait modes


def waiting(obj: dict) -> bool:  # type: ignore[type-arg]
    return condition(obj, "Healthy") == ("Unknown", "Progressing")


async def test_new_revision_cancels_the_health_wait(env: ControllerEnv) -> None:
    env.cluster.require_server()  # a Deployment that never becomes ready
    ns = env.namespace
    await env.publish({"deploy.yaml": deployment("web")})
    await env.start(feature_gates=env.gates(CancelHealthCheckOnNewRevision=True))
    await env.create(env.kustomization(targetNamespace=ns, wait=True, timeout="5m"))
    await env.wait_for("app", waiting)

    fixed = await env.publish({"cm.yaml": configmap("a")})
    obj = await env.wait_ready(revision=fixed["revision"])
    assert condition(obj, "Healthy") == ("True", "Succeeded")  # the ConfigMap; the Deployment was pruned
    trigger = f"GitRepository/{ns}/repo"
    event = await env.wait_event(lambda e: e["reason"] == "HealthCheckCanceled")
    assert event["type"] == "Normal"
    assert event["message"] == f"Health checks canceled due to new reconciliation triggered by {trigger}"
    assert not await env.exists("apps/v1", "Deployment", "web")
    assert all(h["lastReconciledStatus"] != "HealthCheckFailed" for h in obj["status"]["history"])


async def test_requested_reconcile_cancels_and_reports_the_trigger(env: ControllerEnv) -> None:
    env.cluster.require_server()  # a Deployment that never becomes ready
    ns = env.namespace
    await env.publish({"deploy.yaml": deployment("web")})
    await env.start(feature_gates=env.gates(CancelHealthCheckOnNewRevision=True))
    await env.create(env.kustomization(targetNamespace=ns, wait=True, timeout="5m"))
    await env.wait_for("app", waiting)
    await env.request_reconcile()
    event = await env.wait_event(lambda e: e["reason"] == "HealthCheckCanceled")
    assert event["message"] == f"Health checks canceled due to new reconciliation triggered by Kustomization/{ns}/app"
    # the requeued reconcile (which will record lastHandledReconcileAt when it ends) waits again; its own
    # requeue is not an enqueue event, so it is not cancelled in turn. (The Ready=False HealthCheckCanceled
    # status is written, and replaced once the new wait is published, --progress-status-delay later.)
    obj = await env.wait_for("app", lambda o: waiting(o) and condition(o, "Ready") == ("Unknown", "Progressing"))
    assert condition(obj, "Ready") == ("Unknown", "Progressing")
    canceled = [e for e in await env.events() if e["reason"] == "HealthCheckCanceled"]
    assert len(canceled) == 1 and canceled[0].get("count", 1) == 1


async def test_deletion_cancels_the_health_wait(env: ControllerEnv) -> None:
    env.cluster.require_server()  # a Deployment that never becomes ready
    ns = env.namespace
    await env.publish({"deploy.yaml": deployment("web")})
    await env.start(feature_gates=env.gates(CancelHealthCheckOnNewRevision=True))
    await env.create(env.kustomization(targetNamespace=ns, wait=True, timeout="5m"))
    await env.wait_for("app", waiting)
    await env.delete_ks()
    await env.wait_gone()
    assert not await env.exists("apps/v1", "Deployment", "web")
