"""Detect-only drift in the apply engine: drifted objects whose desired state is unchanged are not written,
changed ones are, and the verified-applies memory never hides a drift."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from kustomize_controller.apply.changeset import Action
from kustomize_controller.apply.detect_only import HeldDrift
from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
from kustomize_controller.apply.objects import Object, ObjRef
from kustomize_controller.apply.verified import VerifiedApplies
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import NotFoundError
from kustomize_controller.runtime.clock import RealClock
from tests.integration.apply.conftest import configmap, mark, writes
from tests.integration.apply.test_staged_apply import deployment

pytestmark = pytest.mark.integration


class Policy:
    """Unchanged for every object except those named in ``changed``."""

    def __init__(self, *, changed: tuple[str, ...] = ()) -> None:
        self.changed = changed
        self.drifts: list[HeldDrift] = []

    def unchanged(self, ref: ObjRef, desired: Object, *, live: Object | None, dry_run: Object | None) -> bool:
        return ref.name not in self.changed

    def held(self, drift: HeldDrift) -> None:
        self.drifts.append(drift)


async def edit(kube: KubeClient, ns: str, name: str, data: dict[str, str]) -> None:
    await kube.patch("v1", "ConfigMap", name, ns, {"data": data}, patch_type="merge", field_manager="kubectl-edit")


async def test_drift_of_an_unchanged_object_is_not_written_and_stays_visible(cluster: Any, kube: KubeClient) -> None:
    ns = cluster.namespace
    rm = ResourceManager(client=kube, clock=RealClock(), concurrency=4, verified=VerifiedApplies())
    desired = [configmap("a", ns, data={"key": "value"}), configmap("b", ns, data={"key": "value"})]
    for _ in range(2):  # the second run proves both in sync: the verified memory now holds them
        await rm.apply_all_staged(desired, ApplyOptions())
    await edit(kube, ns, "a", {"key": "hot-fix"})

    for _ in range(3):  # every reconcile sees the drift again: the verified memory must not hide it
        policy = Policy()
        before = mark(cluster)
        change_set = await rm.apply_all_staged(desired, ApplyOptions(detect_only=policy))
        assert writes(cluster, since=before) == []
        assert {e.action for e in change_set} == {Action.UNCHANGED}
        assert [(str(d.ref), d.paths) for d in policy.drifts] == [(f"ConfigMap/{ns}/a", ("data.key",))]
    assert (await kube.get("v1", "ConfigMap", "a", ns))["data"] == {"key": "hot-fix"}


async def test_changed_and_new_objects_are_applied(cluster: Any, kube: KubeClient) -> None:
    ns = cluster.namespace
    rm = ResourceManager(client=kube, clock=RealClock(), concurrency=4)
    await rm.apply_all_staged([configmap("a", ns), configmap("b", ns)], ApplyOptions())
    await edit(kube, ns, "a", {"key": "hot-fix"})
    await edit(kube, ns, "b", {"key": "hot-fix"})

    policy = Policy(changed=("b", "c"))  # c is new: never applied, so never "unchanged"
    desired = [configmap("a", ns), configmap("b", ns, data={"key": "v2"}), configmap("c", ns)]
    change_set = await rm.apply_all_staged(desired, ApplyOptions(detect_only=policy))
    assert change_set.to_map() == {
        f"ConfigMap/{ns}/a": "unchanged",
        f"ConfigMap/{ns}/b": "configured",
        f"ConfigMap/{ns}/c": "created",
    }
    assert [str(d.ref) for d in policy.drifts] == [f"ConfigMap/{ns}/a"]
    assert (await kube.get("v1", "ConfigMap", "a", ns))["data"] == {"key": "hot-fix"}
    assert (await kube.get("v1", "ConfigMap", "b", ns))["data"] == {"key": "v2"}


async def test_without_policy_drift_is_corrected(cluster: Any, kube: KubeClient) -> None:
    ns = cluster.namespace
    rm = ResourceManager(client=kube, clock=RealClock(), concurrency=4)
    await rm.apply_all_staged([configmap("a", ns)], ApplyOptions())
    await edit(kube, ns, "a", {"key": "hot-fix"})
    change_set = await rm.apply_all_staged([configmap("a", ns)], ApplyOptions())
    assert str(change_set) == f"ConfigMap/{ns}/a configured"
    assert (await kube.get("v1", "ConfigMap", "a", ns))["data"] == {"key": "value"}


async def test_an_immutable_drift_is_not_recreated_even_with_force(cluster: Any, kube: KubeClient) -> None:
    ns = cluster.namespace
    rm = ResourceManager(client=kube, clock=RealClock(), concurrency=4)
    await rm.apply_all_staged([deployment("web", ns, app="v1")], ApplyOptions())
    # recreated out of band with another selector: applying the desired one would need a re-create
    await kube.delete("apps/v1", "Deployment", "web", ns)
    for _ in range(200):  # a real cluster may keep it a moment for its garbage collector
        if not [d for d in await kube.list("apps/v1", "Deployment", ns) if d["metadata"]["name"] == "web"]:
            break
        await asyncio.sleep(0.1)
    await kube.create(deployment("web", ns, app="hot"))
    uid = (await kube.get("apps/v1", "Deployment", "web", ns))["metadata"]["uid"]

    policy = Policy()
    before = mark(cluster)
    options = ApplyOptions(force=True, detect_only=policy)
    change_set = await rm.apply_all_staged([deployment("web", ns, app="v1")], options)
    assert writes(cluster, since=before) == []
    assert str(change_set) == f"Deployment/{ns}/web unchanged"
    assert [(str(d.ref), d.recreate) for d in policy.drifts] == [(f"Deployment/{ns}/web", True)]
    assert (await kube.get("apps/v1", "Deployment", "web", ns))["metadata"]["uid"] == uid


async def test_an_object_deleted_out_of_band_is_not_recreated(cluster: Any, kube: KubeClient) -> None:
    ns = cluster.namespace
    rm = ResourceManager(client=kube, clock=RealClock(), concurrency=4)
    if_not_present = configmap("seed", ns, annotations={"kustomize.toolkit.fluxcd.io/ssa": "IfNotPresent"})
    desired = [configmap("a", ns), configmap("b", ns), if_not_present]
    await rm.apply_all_staged(desired, ApplyOptions())
    for name in ("a", "seed"):
        await kube.delete("v1", "ConfigMap", name, ns)

    policy = Policy()
    change_set = await rm.apply_all_staged(desired, ApplyOptions(detect_only=policy))
    assert change_set.to_map() == {f"ConfigMap/{ns}/a": "skipped", f"ConfigMap/{ns}/b": "unchanged",
                                   f"ConfigMap/{ns}/seed": "created"}
    assert [d.describe() for d in policy.drifts] == [f"ConfigMap/{ns}/a (deleted)"]
    assert not [c for c in await kube.list("v1", "ConfigMap", ns) if c["metadata"]["name"] == "a"]


async def test_a_deleted_namespace_and_its_objects_are_left_deleted(cluster: Any, kube: KubeClient) -> None:
    """Stage 1 does not wait for a Namespace that is left deleted, its objects are drift too."""
    ns = f"{cluster.namespace}-gone"
    rm = ResourceManager(client=kube, clock=RealClock(), concurrency=4)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    desired = [namespace, configmap("a", ns)]
    try:
        await rm.apply_all_staged(desired, ApplyOptions())
        await kube.delete("v1", "Namespace", ns)
        for _ in range(200):  # a real cluster finalizes the namespace first
            if not [n for n in await kube.list("v1", "Namespace") if n["metadata"]["name"] == ns]:
                break
            await asyncio.sleep(0.1)

        policy = Policy()
        before = mark(cluster) if cluster.server is not None else 0
        change_set = await rm.apply_all_staged(desired, ApplyOptions(detect_only=policy, wait_timeout=5))
        assert change_set.to_map() == {f"Namespace/{ns}": "skipped", f"ConfigMap/{ns}/a": "skipped"}
        assert sorted(d.describe() for d in policy.drifts) == [f"ConfigMap/{ns}/a (deleted)",
                                                               f"Namespace/{ns} (deleted)"]
        if cluster.server is not None:
            assert writes(cluster, since=before) == []
    finally:  # whatever happened, the namespace must not outlive the test
        with contextlib.suppress(NotFoundError):
            await kube.delete("v1", "Namespace", ns)
