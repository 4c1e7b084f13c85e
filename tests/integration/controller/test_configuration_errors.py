"""Terminal configuration errors (upstream ``kustomization_configuration_error_test.go``): Ready=False and
Stalled=True with the reason, no Reconciling, a Warning event, and no retry until the spec changes."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


def stalled(reason: str):  # type: ignore[no-untyped-def]
    return lambda o: condition(o, "Stalled") == ("True", reason)


async def test_invalid_health_check_expression(env: ControllerEnv) -> None:
    artifact = await env.publish({"cm.yaml": configmap("a")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace, healthCheckExprs=[
        {"apiVersion": "v1", "kind": "ConfigMap", "current": "data.key =="}]))
    obj = await env.wait_for("app", stalled("InvalidCELExpression"))
    message = condition_message(obj, "Ready")
    assert condition(obj, "Ready") == ("False", "InvalidCELExpression")
    assert message.startswith("Reconciliation failed terminally due to configuration error: ")
    assert condition(obj, "Reconciling") is None
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
    assert not await env.exists("v1", "ConfigMap", "a")
    warning = await env.wait_event(lambda e: e["type"] == "Warning")
    assert (warning["reason"], warning["message"]) == ("InvalidCELExpression", message)

    # fixing the spec clears Stalled
    await env.patch_spec({"healthCheckExprs": [{"apiVersion": "v1", "kind": "ConfigMap", "current": "true"}]})
    obj = await env.wait_ready(revision=artifact["revision"])
    assert condition(obj, "Stalled") is None


async def test_decryption_service_account_needs_its_gate(env: ControllerEnv) -> None:
    await env.publish({"cm.yaml": configmap("a")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace, decryption={
        "provider": "sops", "serviceAccountName": "decryptor"}))
    obj = await env.wait_for("app", stalled("FeatureGateDisabled"))
    assert condition_message(obj, "Ready") == (
        "to use spec.decryption.serviceAccountName for decryption authentication please enable the "
        "ObjectLevelWorkloadIdentity feature gate in the controller")


async def test_external_artifact_needs_its_gate(env: ControllerEnv) -> None:
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace,
                                       sourceRef={"kind": "ExternalArtifact", "name": "ext"}))
    obj = await env.wait_for("app", stalled("AccessDenied"))
    assert condition_message(obj, "Ready") == (
        f"can't access 'ExternalArtifact/{env.namespace}/ext', ExternalArtifact feature gate is disabled")


async def test_config_map_kubeconfig_is_refused_clearly(env: ControllerEnv) -> None:
    await env.publish({"cm.yaml": configmap("a")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace, kubeConfig={
        "configMapRef": {"name": "cluster-info"}}))
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "ReconciliationFailed"))
    assert condition_message(obj, "Ready").startswith("spec.kubeConfig.configMapRef")
