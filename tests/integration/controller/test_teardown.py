"""The controller fixture leaves a cluster as it found it: on a real cluster nothing else would clean up
after a test, and a Kustomization held by its finalizer would wait for a controller forever."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import KS_API, ControllerEnv
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


async def test_clean_up_removes_kustomizations_finalizers_and_extra_namespaces(env: ControllerEnv) -> None:
    ns = env.namespace
    other = f"{ns}-extra"
    role = (f"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {ns}-reader\n"
            "rules:\n  - apiGroups: ['']\n    resources: [configmaps]\n    verbs: [get]\n")
    artifact = await env.publish({"cm.yaml": configmap("a"), "role.yaml": role})
    await env.create_namespace(other)
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    stray = env.kustomization("stray")
    stray["metadata"]["namespace"] = other
    stray["metadata"]["finalizers"] = ["finalizers.fluxcd.io"]  # as if a controller had reconciled it
    await env.client.create(stray)
    await env.wait_ready(revision=artifact["revision"])
    await env.stop()
    await env.clean_up()
    assert await env.client.list(KS_API, "Kustomization", ns) == []
    assert await env.client.list(KS_API, "Kustomization", other) == []
    names = {n["metadata"]["name"]: n for n in await env.client.list("v1", "Namespace")}
    # gone, or on a real cluster still being emptied by its namespace controller
    assert other not in names or names[other]["metadata"].get("deletionTimestamp")
    # cluster-scoped objects of the inventory would outlive the namespace: gone too
    assert not await env.exists_cluster_scoped("rbac.authorization.k8s.io/v1", "ClusterRole", f"{ns}-reader")
