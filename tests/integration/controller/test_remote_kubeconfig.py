"""``spec.kubeConfig.secretRef`` (upstream's remote-cluster tests): objects go to the cluster in the
Secret's kubeconfig, not the controller's; a missing Secret is a clear ReconciliationFailed."""

from __future__ import annotations

import asyncio
import base64
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
    assert condition_message(obj, "Ready") == (
        f"failed to build kube client: unable to read KubeConfig secret '{env.namespace}/nope' error: "
        'secrets "nope" not found')
    await env.client.create({"apiVersion": "v1", "kind": "Secret",
                             "metadata": {"name": "nope", "namespace": env.namespace}, "data": {"other": "eA=="}})
    await env.request_reconcile()
    expected = (f"failed to build kube client: KubeConfig secret '{env.namespace}/nope' does not contain a 'value' "
                "key with a kubeconfig")
    await env.wait_for("app", lambda o: condition_message(o, "Ready") == expected)
