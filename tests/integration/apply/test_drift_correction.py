"""Drift correction: kubectl edits of our fields are reverted, other managers' fields are kept."""

from __future__ import annotations

from typing import Any

import pytest

from kustomize_controller.apply.changeset import Action
from kustomize_controller.apply.drift import compile_ignore_rules
from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
from kustomize_controller.kube.client import KubeClient
from tests.integration.apply.conftest import configmap

pytestmark = pytest.mark.integration


class _Rule:
    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.target = None


async def test_kubectl_edits_are_reverted_other_managers_fields_are_kept(
    cluster: Any, kube: KubeClient, manager: ResourceManager
) -> None:
    ns = cluster.namespace
    desired = configmap("cfg", ns, data={"key": "value"})
    await manager.apply_all_staged([desired], ApplyOptions())
    # kubectl edit: changes our value and adds a key (an Update entry of manager "kubectl-edit")
    await kube.patch(
        "v1",
        "ConfigMap",
        "cfg",
        ns,
        {"data": {"key": "edited", "added-by-kubectl": "x"}},
        patch_type="merge",
        field_manager="kubectl-edit",
    )
    # another controller adds its own key (server-side apply, manager "other-controller")
    await kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": ns},
            "data": {"owned-by-other": "y"},
        },
        field_manager="other-controller",
        force=False,
    )
    cs = await manager.apply_all_staged([desired], ApplyOptions())
    assert [e.action for e in cs] == [Action.CONFIGURED]
    live = await kube.get("v1", "ConfigMap", "cfg", ns)
    assert live["data"] == {"key": "value", "owned-by-other": "y"}
    managers = {e["manager"] for e in live["metadata"]["managedFields"]}
    assert "kubectl-edit" not in managers
    assert {"kustomize-controller", "other-controller"} <= managers
    cs = await manager.apply_all_staged([desired], ApplyOptions())
    assert [e.action for e in cs] == [Action.UNCHANGED]


async def test_merge_mode_keeps_kubectl_additions(cluster: Any, kube: KubeClient, manager: ResourceManager) -> None:
    ns = cluster.namespace
    desired = configmap("cfg", ns, annotations={"kustomize.toolkit.fluxcd.io/ssa": "Merge"})
    await manager.apply_all_staged([desired], ApplyOptions())
    await kube.patch(
        "v1", "ConfigMap", "cfg", ns, {"data": {"added": "x"}}, patch_type="merge", field_manager="kubectl-edit"
    )
    cs = await manager.apply_all_staged([desired], ApplyOptions())
    assert [e.action for e in cs] == [Action.UNCHANGED]
    assert (await kube.get("v1", "ConfigMap", "cfg", ns))["data"] == {"key": "value", "added": "x"}


async def test_ignored_path_is_not_reverted(cluster: Any, kube: KubeClient, manager: ResourceManager) -> None:
    ns = cluster.namespace
    desired = configmap("cfg", ns, data={"key": "value", "tuned": "1"})
    await manager.apply_all_staged([desired], ApplyOptions())
    await kube.patch("v1", "ConfigMap", "cfg", ns, {"data": {"tuned": "5"}}, patch_type="merge", field_manager="tuner")
    options = ApplyOptions(ignore_rules=compile_ignore_rules([_Rule(["/data/tuned"])]))
    cs = await manager.apply_all_staged([desired], options)
    assert [e.action for e in cs] == [Action.UNCHANGED]
    # a real change elsewhere re-applies, adopting the live value of the ignored path
    cs = await manager.apply_all_staged([configmap("cfg", ns, data={"key": "v2", "tuned": "1"})], options)
    assert [e.action for e in cs] == [Action.CONFIGURED]
    assert (await kube.get("v1", "ConfigMap", "cfg", ns))["data"] == {"key": "v2", "tuned": "5"}
