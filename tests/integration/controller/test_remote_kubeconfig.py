"""``spec.kubeConfig.secretRef`` (upstream's remote-cluster tests): objects go to the cluster in the
Secret's kubeconfig, not the controller's; a missing Secret is a clear ReconciliationFailed."""

from __future__ import annotations

import asyncio
import base64
from datetime import timedelta
from pathlib import Path

import pytest

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.kube.errors import NotFoundError
from kustomize_controller.testing.apiserver import ApiServer
from tests.integration.controller.conftest import ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


async def test_applies_and_prunes_on_the_remote_cluster(env: ControllerEnv) -> None:
    ns = env.namespace
    async with ApiServer() as remote:
        config = await load_kubeconfig(remote.kubeconfig_path)
        async with KubeClient(config=config) as remote_client:
            await remote_client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            raw = await asyncio.to_thread(Path(remote.kubeconfig_path).read_bytes)
            await env.client.create({"apiVersion": "v1", "kind": "Secret",
                                     "metadata": {"name": "remote", "namespace": ns},
                                     "data": {"value.yaml": base64.b64encode(raw).decode()}})
            first = await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b")})
            await env.start()
            await env.create(env.kustomization(targetNamespace=ns, kubeConfig={"secretRef": {"name": "remote"}}))
            await env.wait_ready(revision=first["revision"])
            assert (await remote_client.get("v1", "ConfigMap", "a", ns))["data"] == {"key": "value"}
            assert not await env.exists("v1", "ConfigMap", "a")

            second = await env.publish({"a.yaml": configmap("a")})
            await env.wait_ready(revision=second["revision"])
            with pytest.raises(NotFoundError):
                await remote_client.get("v1", "ConfigMap", "b", ns)

            await env.delete_ks()
            await env.wait_gone()
            with pytest.raises(NotFoundError):
                await remote_client.get("v1", "ConfigMap", "a", ns)


async def test_missing_kubeconfig_secret(env: ControllerEnv) -> None:
    await env.publish({"a.yaml": configmap("a")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace, kubeConfig={"secretRef": {"name": "nope"}}))
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "ReconciliationFailed"))
    # as upstream's (compared on kube-apiserver v1.36 by e2e/flux): the condition without the prefix the
    # event has
    missing = f"unable to read KubeConfig secret '{env.namespace}/nope' error: secrets \"nope\" not found"
    assert condition_message(obj, "Ready") == missing
    event = await env.wait_event(lambda e: e["type"] == "Warning")
    assert event["message"] == f"failed to build kube client: {missing}"
    await env.client.create({"apiVersion": "v1", "kind": "Secret",
                             "metadata": {"name": "nope", "namespace": env.namespace}, "data": {"other": "eA=="}})
    await env.request_reconcile()
    expected = f"KubeConfig secret '{env.namespace}/nope' does not contain a 'value' key with a kubeconfig"
    await env.wait_for("app", lambda o: condition_message(o, "Ready") == expected)


async def test_deletion_waits_for_the_kubeconfig(env: ControllerEnv) -> None:
    ns = env.namespace
    async with ApiServer() as remote:
        config = await load_kubeconfig(remote.kubeconfig_path)
        async with KubeClient(config=config) as remote_client:
            await remote_client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            raw = await asyncio.to_thread(Path(remote.kubeconfig_path).read_bytes)
            secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "remote", "namespace": ns},
                      "data": {"value": base64.b64encode(raw).decode()}}
            await env.client.create(secret)
            artifact = await env.publish({"a.yaml": configmap("a")})
            await env.start(min_retry_delay=timedelta(milliseconds=100),
                            max_retry_delay=timedelta(seconds=1))
            await env.create(env.kustomization(targetNamespace=ns, kubeConfig={"secretRef": {"name": "remote"}}))
            await env.wait_ready(revision=artifact["revision"])

            await env.client.delete("v1", "Secret", "remote", ns)
            await env.delete_ks()
            event = await env.wait_event(lambda e: e["type"] == "Warning")
            assert event["message"] == (f"failed to build kube client: unable to read KubeConfig secret "
                                        f"'{ns}/remote' error: secrets \"remote\" not found")
            assert "finalizers.fluxcd.io" in (await env.get_ks())["metadata"]["finalizers"]
            await remote_client.get("v1", "ConfigMap", "a", ns)  # still there

            await env.client.create(secret)
            await env.wait_gone()
            with pytest.raises(NotFoundError):
                await remote_client.get("v1", "ConfigMap", "a", ns)
