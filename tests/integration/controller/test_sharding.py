"""Which Kustomizations an instance reconciles (upstream ``--watch-label-selector`` sharding and
``--watch-all-namespaces=false``)."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


async def test_label_selector_shards(env: ControllerEnv) -> None:
    ns = env.namespace
    artifact = await env.publish({"a/cm.yaml": configmap("a"), "b/cm.yaml": configmap("b")})
    await env.start(watch_label_selector="sharding.fluxcd.io/key=shard1")
    mine = env.kustomization("mine", path="./a", targetNamespace=ns)
    mine["metadata"]["labels"] = {"sharding.fluxcd.io/key": "shard1"}
    other = env.kustomization("other", path="./b", targetNamespace=ns)
    other["metadata"]["labels"] = {"sharding.fluxcd.io/key": "shard2"}
    await env.create(other)
    await env.create(mine)
    await env.wait_ready("mine", revision=artifact["revision"])
    # "other" was created first: had this instance seen it, it would carry the finalizer by now
    obj = await env.get_ks("other")
    assert "finalizers" not in obj["metadata"]
    assert not obj.get("status", {}).get("conditions")
    assert not await env.exists("v1", "ConfigMap", "b")


async def test_single_namespace_mode(env: ControllerEnv) -> None:
    ns = env.namespace
    other_ns = f"{ns}-other"
    await env.create_namespace(other_ns)
    artifact = await env.publish({"cm.yaml": configmap("a")})
    await env.start(watch_all_namespaces=False)
    elsewhere = env.kustomization("elsewhere", targetNamespace=ns,
                                  sourceRef={"kind": "GitRepository", "name": "repo", "namespace": ns})
    elsewhere["metadata"]["namespace"] = other_ns
    await env.client.create(elsewhere)
    await env.create(env.kustomization(targetNamespace=ns))
    await env.wait_ready(revision=artifact["revision"])
    obj = await env.client.get("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "elsewhere", other_ns)
    assert "finalizers" not in obj["metadata"]
