"""A Kustomization applies its source's manifests and reports upstream's status."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv, condition, condition_message

pytestmark = pytest.mark.integration

CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  greeting: hello
"""
SERVICE_ACCOUNT = """apiVersion: v1
kind: ServiceAccount
metadata:
  name: app
"""


async def test_apply_sets_status_inventory_and_owner_labels(env: ControllerEnv) -> None:
    artifact = await env.publish({"deploy/cm.yaml": CONFIGMAP, "deploy/sa.yaml": SERVICE_ACCOUNT})
    await env.start()
    await env.create(env.kustomization(path="./deploy", targetNamespace=env.namespace))
    obj = await env.wait_ready(revision=artifact["revision"])

    status = obj["status"]
    assert status["lastAttemptedRevision"] == artifact["revision"]
    assert status["observedGeneration"] == obj["metadata"]["generation"]
    assert condition(obj, "Reconciling") is None
    assert condition_message(obj, "Ready") == f"Applied revision: {artifact['revision']}"
    assert "finalizers.fluxcd.io" in obj["metadata"]["finalizers"]
    ids = sorted(e["id"] for e in status["inventory"]["entries"])
    ns = env.namespace
    assert ids == [f"{ns}_app__ServiceAccount", f"{ns}_settings__ConfigMap"]
    assert {e["v"] for e in status["inventory"]["entries"]} == {"v1"}
    (history,) = status["history"]
    assert history["digest"].startswith("sha256:")
    assert history["lastReconciledStatus"] == "ReconciliationSucceeded"
    assert history["metadata"] == {"revision": artifact["revision"]}

    cm = await env.client.get("v1", "ConfigMap", "settings", ns)
    assert cm["data"] == {"greeting": "hello"}
    assert cm["metadata"]["labels"] == {
        "kustomize.toolkit.fluxcd.io/name": "app",
        "kustomize.toolkit.fluxcd.io/namespace": ns,
    }
    managers = {m["manager"] for m in cm["metadata"]["managedFields"]}
    assert "kustomize-controller" in managers


async def test_generated_kustomization_from_plain_yaml_and_missing_path(env: ControllerEnv) -> None:
    await env.publish({"apps/cm.yaml": CONFIGMAP})
    await env.start()
    await env.create(env.kustomization(path="./missing", targetNamespace=env.namespace))
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "ArtifactFailed"))
    assert condition_message(obj, "Ready").startswith("kustomization path not found")
    assert condition(obj, "Reconciling") == ("True", "ProgressingWithRetry")
    assert "inventory" not in obj["status"]
    assert not await env.exists("v1", "ConfigMap", "settings")
