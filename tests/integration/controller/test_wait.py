"""``spec.wait: true``: every applied object (skipped ones excluded) must become Current; it overrides
``healthChecks``. Without wait or health checks the Healthy condition is absent."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv, condition
from tests.integration.controller.manifests import configmap, deployment

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("wait_mode")]  # both health-wait modes


async def test_wait_covers_every_applied_object(env: ControllerEnv) -> None:
    env.cluster.require_server()  # plays the deployment controller itself
    ns = env.namespace
    skipped = configmap("skipped", annotations={"kustomize.toolkit.fluxcd.io/reconcile": "disabled"})
    artifact = await env.publish({"cm.yaml": configmap("a"), "deploy.yaml": deployment("web"),
                                  "skipped.yaml": skipped})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, wait=True, timeout="5m", healthChecks=[
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "namespace": ns}]))
    obj = await env.wait_for("app", lambda o: condition(o, "Healthy") == ("Unknown", "Progressing"))
    assert condition(obj, "Ready") == ("Unknown", "Progressing")
    assert await env.exists("apps/v1", "Deployment", "web")

    # play the deployment controller: the rollout completes
    web = await env.get("apps/v1", "Deployment", "web")
    await env.client.patch("apps/v1", "Deployment", "web", ns, {"status": {
        "observedGeneration": web["metadata"]["generation"], "replicas": 1, "updatedReplicas": 1,
        "readyReplicas": 1, "availableReplicas": 1,
        "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                       {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]}},
        patch_type="merge", subresource="status")
    obj = await env.wait_ready(revision=artifact["revision"])
    assert condition(obj, "Healthy") == ("True", "Succeeded")
    assert f"{ns}_skipped__ConfigMap" in [e["id"] for e in obj["status"]["inventory"]["entries"]]


async def test_no_wait_no_healthy_condition(env: ControllerEnv) -> None:
    artifact = await env.publish({"deploy.yaml": deployment("web")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace))
    obj = await env.wait_ready(revision=artifact["revision"])
    assert condition(obj, "Healthy") is None
