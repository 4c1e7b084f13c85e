"""Health assessment (upstream ``kustomization_wait_test.go`` and the CEL health checks): ``healthChecks``
references and ``healthCheckExprs`` for custom resources; success, fail-fast failure and timeout."""

from __future__ import annotations

import asyncio
import re

import pytest

from tests.integration.controller.conftest import ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap, deployment

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("wait_mode")]  # both health-wait modes

WIDGET_CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.test.example.com
spec:
  group: test.example.com
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
"""
WIDGET = """apiVersion: test.example.com/v1
kind: Widget
metadata:
  name: w
spec:
  size: 1
"""
WIDGET_EXPRS = [{"apiVersion": "test.example.com/v1", "kind": "Widget",
                 "inProgress": "!has(status.phase) || status.phase == 'Pending'",
                 "failed": "status.phase == 'Failed'",
                 "current": "status.phase == 'Ready'"}]


async def set_widget_phase(env: ControllerEnv, phase: str) -> None:
    await env.client.patch("test.example.com/v1", "Widget", "w", env.namespace, {"status": {"phase": phase}},
                           patch_type="merge", subresource="status")


def health_running(obj: dict) -> bool:  # type: ignore[type-arg]
    return condition(obj, "Healthy") == ("Unknown", "Progressing")


async def test_health_checks_pass(env: ControllerEnv) -> None:
    ns = env.namespace
    artifact = await env.publish({"cm.yaml": configmap("a")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, timeout="30s", healthChecks=[
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "namespace": ns}]))
    obj = await env.wait_ready(revision=artifact["revision"])
    assert condition(obj, "Healthy") == ("True", "Succeeded")
    assert condition_message(obj, "Healthy").startswith("Health check passed in ")
    await env.wait_event(lambda e: e["message"].startswith("Health check passed in ") and e["reason"] == "Progressing")
    # still healthy, same revision: upstream emits the "passed" event only on recovery or drift of a new revision
    token = await env.request_reconcile()
    obj = await env.wait_handled(token)
    assert condition(obj, "Healthy") == ("True", "Succeeded")
    # barrier: the recorder is FIFO and "Reconciliation finished" is the last event of the second run
    for _ in range(300):
        finished = [e for e in await env.events() if e["message"].startswith("Reconciliation finished")]
        if sum(e.get("count", 1) for e in finished) >= 2:
            break
        await asyncio.sleep(0.1)
    passed = [e for e in await env.events() if e["message"].startswith("Health check passed")]
    assert sum(e.get("count", 1) for e in passed) == 1


async def test_custom_resource_health_from_exprs_then_failure(env: ControllerEnv) -> None:
    ns = env.namespace
    artifact = await env.publish({"crd.yaml": WIDGET_CRD, "widget.yaml": WIDGET})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, timeout="2m", healthCheckExprs=WIDGET_EXPRS,
                                       healthChecks=[{"apiVersion": "test.example.com/v1", "kind": "Widget",
                                                      "name": "w", "namespace": ns}]))
    obj = await env.wait_for("app", health_running)
    assert condition_message(obj, "Reconciling") == (
        f"Running health checks for revision {artifact['revision']} with a timeout of 2m0s")
    await set_widget_phase(env, "Ready")
    obj = await env.wait_ready(revision=artifact["revision"])
    assert condition(obj, "Healthy") == ("True", "Succeeded")

    # the widget fails: the next reconcile stops early (fail-fast) with HealthCheckFailed
    await set_widget_phase(env, "Failed")
    token = await env.request_reconcile()
    obj = await env.wait_handled(token)
    assert condition(obj, "Ready") == ("False", "HealthCheckFailed")
    assert condition(obj, "Healthy") == ("False", "HealthCheckFailed")
    assert condition(obj, "Reconciling") == ("True", "ProgressingWithRetry")
    message = condition_message(obj, "Ready")
    assert re.fullmatch(r"health check failed after \S+: failed early due to stalled resources: "
                        rf"\[Widget/{ns}/w status: 'Failed'\]", message), message
    assert condition_message(obj, "Healthy") == (
        f"failed early due to stalled resources: [Widget/{ns}/w status: 'Failed']")
    assert obj["status"]["history"][0]["lastReconciledStatus"] == "HealthCheckFailed"
    assert obj["status"]["lastAppliedRevision"] == artifact["revision"]
    event = await env.wait_event(lambda e: e["type"] == "Warning")
    assert event["reason"] == "HealthCheckFailed"
    assert event["message"] == message


async def test_health_check_timeout(env: ControllerEnv) -> None:
    """The embedded API server runs no deployment controller: the rollout never completes (one 30 s test)."""
    env.cluster.require_server()
    ns = env.namespace
    artifact = await env.publish({"deploy.yaml": deployment("web")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, timeout="1s", healthChecks=[
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": ns}]))
    obj = await env.wait_for("app", health_running)
    # the timeout is clamped to 30 s, as upstream's GetTimeout does
    assert condition_message(obj, "Healthy") == (
        f"Running health checks for revision {artifact['revision']} with a timeout of 30s")
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "HealthCheckFailed"), within=90)
    message = condition_message(obj, "Ready")
    assert re.fullmatch(rf"health check failed after 30\.\d+s: timeout waiting for: "
                        rf"\[Deployment/{ns}/web status: 'InProgress'\]", message), message
    assert "lastAppliedRevision" not in obj["status"]
    assert obj["status"]["lastAttemptedRevision"] == artifact["revision"]
    assert await env.exists("apps/v1", "Deployment", "web")


async def test_a_check_on_itself_is_skipped_not_awaited(env: ControllerEnv) -> None:
    ns = env.namespace
    artifact = await env.publish({"cm.yaml": configmap("a")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, healthChecks=[
        {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "name": "app", "namespace": ns}]))
    obj = await env.wait_ready(revision=artifact["revision"])
    # upstream's deadlock guard drops the self-reference, then checks the (empty) rest: Healthy=True
    assert condition(obj, "Healthy") == ("True", "Succeeded")


async def test_reverification_publishes_a_health_wait_that_does_not_pass_at_once(env: ControllerEnv) -> None:
    ns = env.namespace
    artifact = await env.publish({"crd.yaml": WIDGET_CRD, "widget.yaml": WIDGET})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, timeout="2m", healthCheckExprs=WIDGET_EXPRS,
                                       healthChecks=[{"apiVersion": "test.example.com/v1", "kind": "Widget",
                                                      "name": "w", "namespace": ns}]))
    await env.wait_for("app", health_running)
    await set_widget_phase(env, "Ready")
    await env.wait_ready(revision=artifact["revision"])
    # same revision and generation, but the widget is no longer Current: the wait is shown as upstream shows it
    await set_widget_phase(env, "Pending")
    await env.request_reconcile()
    obj = await env.wait_for("app", health_running)
    assert condition(obj, "Ready") == ("Unknown", "Progressing")
    assert condition_message(obj, "Reconciling") == (
        f"Running health checks for revision {artifact['revision']} with a timeout of 2m0s")
    await set_widget_phase(env, "Ready")
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("True", "ReconciliationSucceeded"))
    assert condition(obj, "Healthy") == ("True", "Succeeded")
