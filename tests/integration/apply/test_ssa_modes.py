"""Per-object modes: ssa IfNotPresent / Ignore, reconcile disabled."""

from __future__ import annotations

from typing import Any

import pytest

from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
from kustomize_controller.kube.client import KubeClient
from tests.integration.apply.conftest import configmap, mark, writes

pytestmark = pytest.mark.integration

SSA = "kustomize.toolkit.fluxcd.io/ssa"


async def test_if_not_present_is_created_once_and_never_updated(
    cluster: Any, kube: KubeClient, manager: ResourceManager
) -> None:
    ns = cluster.namespace
    first = configmap("seed", ns, data={"key": "initial"}, annotations={SSA: "IfNotPresent"})
    cs = await manager.apply_all_staged([first], ApplyOptions())
    assert str(cs) == f"ConfigMap/{ns}/seed created"
    # someone changes it in the cluster, and the desired state changes too: neither is applied again
    await kube.patch(
        "v1", "ConfigMap", "seed", ns, {"data": {"key": "theirs"}}, patch_type="merge", field_manager="someone"
    )
    before = mark(cluster)
    changed = configmap("seed", ns, data={"key": "desired-v2"}, annotations={SSA: "ifnotpresent"})
    for _ in range(2):
        cs = await manager.apply_all_staged([changed], ApplyOptions())
        assert str(cs) == f"ConfigMap/{ns}/seed skipped"
    assert writes(cluster, since=before) == []
    assert (await kube.get("v1", "ConfigMap", "seed", ns))["data"] == {"key": "theirs"}


async def test_ignore_and_reconcile_disabled_are_skipped(
    cluster: Any, kube: KubeClient, manager: ResourceManager
) -> None:
    ns = cluster.namespace
    await kube.create(configmap("live-disabled", ns, labels={"kustomize.toolkit.fluxcd.io/reconcile": "disabled"}))
    before = mark(cluster)
    cs = await manager.apply_all_staged(
        [
            configmap("ignored", ns, annotations={SSA: "Ignore"}),
            configmap("live-disabled", ns, data={"key": "new"}),
        ],
        ApplyOptions(),
    )
    assert cs.to_map() == {f"ConfigMap/{ns}/ignored": "skipped", f"ConfigMap/{ns}/live-disabled": "skipped"}
    assert writes(cluster, since=before) == []
