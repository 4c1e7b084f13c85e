"""Prune against the API: only our stale objects, only with our labels; rejected deletes stay tracked."""

from __future__ import annotations

from typing import Any

import pytest

from kustomize_controller.apply import inventory
from kustomize_controller.apply.errors import PruneError
from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
from kustomize_controller.apply.normalize import prepare_objects
from kustomize_controller.apply.prune import delete_all
from kustomize_controller.apply.selectors import owner_labels
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import NotFoundError
from tests.integration.apply.conftest import configmap, mark, writes

pytestmark = pytest.mark.integration

OWNER = owner_labels("apps", "flux-system")


async def apply(manager: ResourceManager, objects: list[dict[str, Any]]) -> Any:
    prepare_objects(objects, owner=OWNER)
    return inventory.from_change_set(await manager.apply_all_staged(objects, ApplyOptions()))


async def exists(kube: KubeClient, name: str, ns: str) -> bool:
    try:
        await kube.get("v1", "ConfigMap", name, ns)
    except NotFoundError:
        return False
    return True


async def test_prune_deletes_only_stale_objects_carrying_our_labels(
    cluster: Any, kube: KubeClient, manager: ResourceManager
) -> None:
    ns = cluster.namespace
    old = await apply(manager, [configmap(n, ns) for n in ("keep", "stale", "moved", "protected")])
    # not ours: never in any inventory
    await kube.create(configmap("foreign", ns, labels=dict(OWNER)))
    # moved to another owner; protected by annotation
    await kube.patch(
        "v1",
        "ConfigMap",
        "moved",
        ns,
        {"metadata": {"labels": {OWNER_KEY: "other"}}},
        patch_type="merge",
        field_manager="someone",
    )
    await kube.patch(
        "v1",
        "ConfigMap",
        "protected",
        ns,
        {"metadata": {"annotations": {"kustomize.toolkit.fluxcd.io/prune": "disabled"}}},
        patch_type="merge",
        field_manager="someone",
    )
    new = await apply(manager, [configmap("keep", ns)])
    stale = inventory.stale_objects(old, new)
    before = mark(cluster)
    cs = await delete_all(kube, stale, owner=OWNER)
    assert cs.to_map() == {
        f"ConfigMap/{ns}/stale": "deleted",
        f"ConfigMap/{ns}/moved": "skipped",
        f"ConfigMap/{ns}/protected": "skipped",
    }
    assert [(w.verb, w.name) for w in writes(cluster, since=before)] == [("delete", "stale")]
    for name, present in (("keep", True), ("stale", False), ("moved", True), ("protected", True), ("foreign", True)):
        assert await exists(kube, name, ns) is present, name


OWNER_KEY = "kustomize.toolkit.fluxcd.io/name"


async def test_rejected_delete_keeps_the_object_in_the_inventory(
    cluster: Any, kube: KubeClient, manager: ResourceManager
) -> None:
    ns = cluster.namespace
    server = cluster.require_server()
    old = await apply(manager, [configmap("a", ns), configmap("guarded", ns), configmap("b", ns)])
    new = await apply(manager, [configmap("a", ns)])
    server.faults.reject_deletes(resource="configmaps", namespace=ns, name="guarded")
    stale = inventory.stale_objects(old, new)
    with pytest.raises(PruneError) as info:
        await delete_all(kube, stale, owner=OWNER)
    assert str(info.value) == (
        f"delete failed, errors: ConfigMap/{ns}/guarded delete failed: admission webhook "
        '"deny-delete.testing.local" denied the request: deletion is not allowed;'
    )
    merged = inventory.merge_survivors(new, stale, info.value.change_set)
    assert [e.id for e in merged.entries] == [f"{ns}_a__ConfigMap", f"{ns}_guarded__ConfigMap"]
    assert await exists(kube, "guarded", ns)
    assert not await exists(kube, "b", ns)
