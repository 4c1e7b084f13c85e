"""Immutable fields: recreate with force, a clear error without it."""

from __future__ import annotations

from typing import Any

import pytest

from kustomize_controller.apply.errors import DryRunError
from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
from kustomize_controller.kube.client import KubeClient
from tests.integration.apply.conftest import mark, writes
from tests.integration.apply.test_staged_apply import deployment

pytestmark = pytest.mark.integration


async def test_immutable_change_without_force_fails_clearly(
    cluster: Any, kube: KubeClient, manager: ResourceManager
) -> None:
    ns = cluster.namespace
    await manager.apply_all_staged([deployment("web", ns, app="v1")], ApplyOptions())
    uid = (await kube.get("apps/v1", "Deployment", "web", ns))["metadata"]["uid"]
    before = mark(cluster)
    with pytest.raises(DryRunError) as info:
        await manager.apply_all_staged([deployment("web", ns, app="v2")], ApplyOptions())
    message = str(info.value)
    assert message.startswith(f"Deployment/{ns}/web dry-run failed (Invalid): ")
    assert "field is immutable" in message
    assert writes(cluster, since=before) == []
    assert (await kube.get("apps/v1", "Deployment", "web", ns))["metadata"]["uid"] == uid


@pytest.mark.parametrize("per_object", [False, True])
async def test_force_recreates_on_immutable_change(
    cluster: Any, kube: KubeClient, manager: ResourceManager, per_object: bool
) -> None:
    ns = cluster.namespace
    await manager.apply_all_staged([deployment("web", ns, app="v1")], ApplyOptions())
    uid = (await kube.get("apps/v1", "Deployment", "web", ns))["metadata"]["uid"]
    desired = deployment("web", ns, app="v2")
    if per_object:
        desired["metadata"]["annotations"] = {"kustomize.toolkit.fluxcd.io/force": "Enabled"}
    cs = await manager.apply_all_staged([desired], ApplyOptions(force=not per_object))
    assert str(cs) == f"Deployment/{ns}/web created"
    live = await kube.get("apps/v1", "Deployment", "web", ns)
    assert live["metadata"]["uid"] != uid
    assert live["spec"]["selector"] == {"matchLabels": {"app": "v2"}}
