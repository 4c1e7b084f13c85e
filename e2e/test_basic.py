"""Apply and Ready: a Kustomization on a published source converges, records its inventory and shows in
the controller's metrics."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kustomize_controller.testing.artifacts import SOURCE_API_VERSION

from .harness import Scenario, configmap, eventually, samples

pytestmark = pytest.mark.timeout(300)

SERVICE_ACCOUNT = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: worker\n"
SERVICE = """apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector:
    app: web
  ports:
    - port: 80
      targetPort: 8080
"""
FILES = {
    "kustomization.yaml": "resources:\n- config.yaml\n- sa.yaml\n- svc.yaml\n",
    "config.yaml": configmap("settings", mode="demo"),
    "sa.yaml": SERVICE_ACCOUNT,
    "svc.yaml": SERVICE,
}


async def test_apply_ready_inventory_and_metrics(scenario: Scenario) -> None:
    ns = scenario.namespace
    artifact = await scenario.publish(FILES)
    await scenario.create_kustomization("basic", wait=True, targetNamespace=ns)

    ks = await scenario.wait_ready("basic")
    status = ks["status"]
    assert status["lastAppliedRevision"] == artifact["revision"]
    assert status["lastAttemptedRevision"] == artifact["revision"]
    assert status["observedGeneration"] == ks["metadata"]["generation"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "ReconciliationSucceeded"
    assert ready["message"] == f"Applied revision: {artifact['revision']}"
    entries = {(e["id"], e["v"]) for e in status["inventory"]["entries"]}
    assert entries == {(f"{ns}_settings__ConfigMap", "v1"), (f"{ns}_worker__ServiceAccount", "v1"),
                       (f"{ns}_web__Service", "v1")}

    # the objects are there, owned by the controller's field manager and labelled as Flux labels them
    cm = await scenario.kube.get("v1", "ConfigMap", "settings", ns)
    assert cm["data"] == {"mode": "demo"}
    assert cm["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"] == "basic"
    assert cm["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/namespace"] == ns
    managers = {m["manager"] for m in cm["metadata"]["managedFields"]}
    assert "kustomize-controller" in managers
    shown = await scenario.kubectl("get", "kustomization/basic", "-n", ns, "-o", "name")
    assert shown.strip() == "kustomization.kustomize.toolkit.fluxcd.io/basic"

    text = await scenario.metrics()
    assert samples(text, "gotk_reconcile_duration_seconds", kind="Kustomization", name="basic", namespace=ns)
    assert 'controller_runtime_reconcile_total{controller="kustomization"' in text
    # controller-runtime counts a reconcile that asks to run again after the interval as "requeue_after"
    # (Flux's success path does), so a clean first run shows there, and nothing as "error"
    counts = {s.labels["result"]: s.value
              for s in samples(text, "controller_runtime_reconcile_total", controller="kustomization")}
    assert counts.get("success", 0) + counts.get("requeue_after", 0) >= 1, counts
    assert counts.get("error", 0) == 0, counts
    assert re.search(r"^rest_client_requests_total\{", text, re.MULTILINE)


async def test_not_ready_source_is_reported_and_recovers(scenario: Scenario) -> None:
    """A missing artifact keeps the Kustomization not ready; publishing it makes it converge."""
    await scenario.kube.create({
        "apiVersion": SOURCE_API_VERSION, "kind": "GitRepository",
        "metadata": {"name": scenario.source, "namespace": scenario.namespace},
        "spec": {"interval": "10m", "url": "https://git.example.invalid/app.git", "suspend": True},
    })
    await scenario.create_kustomization("late", targetNamespace=scenario.namespace)

    def waiting(obj: dict[str, Any]) -> bool:
        conditions = (obj.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "False" for c in conditions)

    ks = await eventually(lambda: scenario.kustomization("late"), waiting, within=60,
                          what="Ready=False while the source has no artifact")
    ready = next(c for c in ks["status"]["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "ArtifactFailed"
    artifact = await scenario.publish(FILES)
    await scenario.wait_applied("late", artifact["revision"])
