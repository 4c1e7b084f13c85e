"""A large group of remembered objects is read with one metadata-only list per reconcile, and drift is still
found: an edit, a label removed, a delete (apply/plan.py ``_list_live``)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from kustomize_controller.apply.changeset import Action, ChangeSet
from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
from kustomize_controller.apply.plan import LIST_MIN_OBJECTS
from kustomize_controller.apply.selectors import owner_labels
from kustomize_controller.apply.verified import VerifiedApplies
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.runtime.clock import RealClock
from tests.integration.apply.conftest import configmap, mark

pytestmark = pytest.mark.integration

N = LIST_MIN_OBJECTS + 4
OWNER = owner_labels("listed", "flux-system")


def desired(ns: str) -> list[dict[str, Any]]:
    return [configmap(f"cm-{i:03d}", ns, data={"i": str(i)}, labels=dict(OWNER)) for i in range(N)]


def options(inventory: ChangeSet) -> ApplyOptions:
    return ApplyOptions(expected=frozenset(e.ref for e in inventory), owner=OWNER)


async def applied(kube: KubeClient, ns: str) -> tuple[ResourceManager, ChangeSet]:
    rm = ResourceManager(client=kube, clock=RealClock(), concurrency=4, verified=VerifiedApplies())
    inventory = await rm.apply_all_staged(desired(ns), ApplyOptions(expected=frozenset(), owner=OWNER))
    return rm, inventory


async def test_a_noop_reads_the_group_with_one_metadata_list(cluster: Any, kube: KubeClient) -> None:
    ns, server = cluster.namespace, cluster.require_server()
    rm, inventory = await applied(kube, ns)
    before = mark(cluster)
    change_set = await rm.apply_all_staged(desired(ns), options(inventory))
    records = list(server.requests)[before:]
    assert Counter("dry-run" if r.dry_run else r.verb for r in records) == {"list": 1}
    assert "labelSelector=" in records[0].query
    assert [e.action for e in change_set] == [Action.UNCHANGED] * N


async def test_drift_is_still_corrected_when_the_group_is_listed(cluster: Any, kube: KubeClient) -> None:
    ns = cluster.namespace
    rm, inventory = await applied(kube, ns)
    await rm.apply_all_staged(desired(ns), options(inventory))
    await kube.patch("v1", "ConfigMap", "cm-001", ns, {"data": {"i": "edited"}}, patch_type="merge",
                     field_manager="kubectl-edit")
    await kube.patch("v1", "ConfigMap", "cm-002", ns, {"metadata": {"labels": None}}, patch_type="merge",
                     field_manager="kubectl-label")
    await kube.delete("v1", "ConfigMap", "cm-003", ns)
    change_set = await rm.apply_all_staged(desired(ns), options(inventory))
    assert [str(e) for e in change_set.changes()] == [
        f"ConfigMap/{ns}/cm-001 configured", f"ConfigMap/{ns}/cm-002 configured", f"ConfigMap/{ns}/cm-003 created"]
    assert (await kube.get("v1", "ConfigMap", "cm-001", ns))["data"] == {"i": "1"}
    labels = (await kube.get("v1", "ConfigMap", "cm-002", ns))["metadata"]["labels"]
    assert labels == OWNER
    assert (await kube.get("v1", "ConfigMap", "cm-003", ns))["data"] == {"i": "3"}  # re-created
