"""VerifiedApplies against the API server: a no-op costs one GET per object; drift is still reverted."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from kustomize_controller.apply.changeset import Action
from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
from kustomize_controller.apply.verified import VerifiedApplies
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.runtime.clock import RealClock
from tests.integration.apply.conftest import configmap, mark, writes

pytestmark = pytest.mark.integration

N = 20


def cached(kube: KubeClient, verified: VerifiedApplies) -> ResourceManager:
    return ResourceManager(client=kube, clock=RealClock(), concurrency=4, verified=verified)


async def test_noop_after_verification_costs_one_get_per_object(cluster: Any, kube: KubeClient) -> None:
    ns, server = cluster.namespace, cluster.require_server()
    rm = cached(kube, VerifiedApplies())
    objects = [configmap(f"cm-{i:03d}", ns, data={"i": str(i)}) for i in range(N)]
    await rm.apply_all_staged(objects, ApplyOptions())
    await rm.apply_all_staged(objects, ApplyOptions())  # verifies with dry-runs
    before = mark(cluster)
    change_set = await rm.apply_all_staged(objects, ApplyOptions())
    records = list(server.requests)[before:]
    assert Counter("dry-run" if r.dry_run else r.verb for r in records) == {"get": N}
    assert {e.action for e in change_set} == {Action.UNCHANGED}


async def test_kubectl_edit_is_reverted_on_the_next_interval(cluster: Any, kube: KubeClient) -> None:
    ns = cluster.namespace
    rm = cached(kube, VerifiedApplies())
    desired = configmap("cfg", ns, data={"key": "value"})
    for _ in range(3):
        await rm.apply_all_staged([desired], ApplyOptions())
    await kube.patch(
        "v1", "ConfigMap", "cfg", ns, {"data": {"key": "edited"}}, patch_type="merge", field_manager="kubectl-edit"
    )
    before = mark(cluster)
    change_set = await rm.apply_all_staged([desired], ApplyOptions())
    assert str(change_set) == f"ConfigMap/{ns}/cfg configured"
    assert [w.content_type for w in writes(cluster, since=before)][-1] == "application/apply-patch+yaml"
    assert (await kube.get("v1", "ConfigMap", "cfg", ns))["data"] == {"key": "value"}


async def test_other_manager_write_is_verified_again_without_a_write(cluster: Any, kube: KubeClient) -> None:
    ns, server = cluster.namespace, cluster.require_server()
    rm = cached(kube, VerifiedApplies())
    desired = configmap("cfg", ns, data={"key": "value"})
    for _ in range(2):
        await rm.apply_all_staged([desired], ApplyOptions())
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": ns}, "data": {"o": "y"}}
    await kube.apply(other, field_manager="other-controller", force=False)
    before = mark(cluster)
    change_set = await rm.apply_all_staged([desired], ApplyOptions())
    assert str(change_set) == f"ConfigMap/{ns}/cfg unchanged"
    assert sum(1 for r in list(server.requests)[before:] if r.dry_run) == 1
    assert not writes(cluster, since=before)


async def test_deleted_and_recreated_object_is_dry_run_again(cluster: Any, kube: KubeClient) -> None:
    ns = cluster.namespace
    rm = cached(kube, VerifiedApplies())
    desired = configmap("cfg", ns, data={"key": "value"})
    for _ in range(2):
        await rm.apply_all_staged([desired], ApplyOptions())
    await kube.delete("v1", "ConfigMap", "cfg", ns)
    await kube.create(configmap("cfg", ns, data={"key": "other"}))
    change_set = await rm.apply_all_staged([desired], ApplyOptions())
    assert str(change_set) == f"ConfigMap/{ns}/cfg configured"
    assert (await kube.get("v1", "ConfigMap", "cfg", ns))["data"] == {"key": "value"}


async def test_changed_manifest_is_applied(cluster: Any, kube: KubeClient) -> None:
    ns = cluster.namespace
    rm = cached(kube, VerifiedApplies())
    for _ in range(2):
        await rm.apply_all_staged([configmap("cfg", ns, data={"key": "v1"})], ApplyOptions())
    change_set = await rm.apply_all_staged([configmap("cfg", ns, data={"key": "v2"})], ApplyOptions())
    assert str(change_set) == f"ConfigMap/{ns}/cfg configured"
    assert (await kube.get("v1", "ConfigMap", "cfg", ns))["data"] == {"key": "v2"}


async def test_restart_forgets_the_proofs_and_pays_the_dry_runs_once(cluster: Any, kube: KubeClient) -> None:
    ns, server = cluster.namespace, cluster.require_server()
    objects = [configmap(f"cm-{i}", ns) for i in range(3)]
    for _ in range(2):
        await cached(kube, VerifiedApplies()).apply_all_staged(objects, ApplyOptions())
    restarted = cached(kube, VerifiedApplies())
    before = mark(cluster)
    change_set = await restarted.apply_all_staged(objects, ApplyOptions())
    assert {e.action for e in change_set} == {Action.UNCHANGED}
    assert sum(1 for r in list(server.requests)[before:] if r.dry_run) == 3
    assert not writes(cluster, since=before)
    before = mark(cluster)
    await restarted.apply_all_staged(objects, ApplyOptions())
    assert sum(1 for r in list(server.requests)[before:] if r.dry_run) == 0
