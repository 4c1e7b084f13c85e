"""VerifiedApplies and workload controllers: a status write is not drift, every real edit still is.

The requests are counted by the client itself (``kustomize_controller_kube_requests_total``), so these
tests run unchanged against a real cluster, where the Deployment controller writes status as the
embedded server's workload simulation does (here a test writes it too, to be sure it happened).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.apply.verified import VerifiedApplies
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.runtime.clock import RealClock
from tests.integration.apply.conftest import configmap

pytestmark = pytest.mark.integration


def deployment(name: str, ns: str, *, image: str = "nginx:1.27", replicas: int = 0) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "app", "image": image}]}}},
    }


def counts(kube: KubeClient) -> dict[str, float]:
    out: dict[str, float] = {}
    for metric in kube.rest_metrics.by_resource_total.collect():
        for s in metric.samples:
            if s.name.endswith("_total"):
                key = f"{s.labels['verb']}{'-dry' if s.labels['dry_run'] == 'true' else ''}"
                out[key] = out.get(key, 0.0) + s.value
    return out


def delta(kube: KubeClient, before: dict[str, float]) -> dict[str, float]:
    after = counts(kube)
    return {k: after[k] - before.get(k, 0.0) for k in after if after[k] - before.get(k, 0.0)}


async def write_status(kube: KubeClient, name: str, ns: str, ready: int) -> None:
    """What a workload controller does: a status write through the subresource, nothing else."""
    await kube.patch("apps/v1", "Deployment", name, ns, {"status": {"observedGeneration": 1, "readyReplicas": ready,
                                                                    "replicas": ready}},
                     patch_type="merge", subresource="status", field_manager="test-workload-controller")


async def settle(kube: KubeClient, name: str, ns: str) -> None:
    """Wait until the controllers that answer a Deployment write (revision annotation, status) are done:
    two reads in a row with the same resourceVersion, a moment apart."""
    last = ""
    for _ in range(50):
        rv = (await kube.get("apps/v1", "Deployment", name, ns))["metadata"]["resourceVersion"]
        if rv == last:
            return
        last = rv
        await asyncio.sleep(0.2)


def engine(kube: KubeClient, verified: VerifiedApplies) -> ResourceManager:
    return ResourceManager(client=kube, clock=RealClock(), concurrency=4, verified=verified)


async def applied_and_settled(kube: KubeClient, rm: ResourceManager, objects: list[dict[str, Any]], ns: str) -> None:
    await rm.apply_all_staged(objects, ApplyOptions())
    await settle(kube, "web", ns)
    # (the controller's answer — the revision annotation and the status, both through /status — costs
    # no dry-run; the next test checks it where it can be sure the controller answered)
    await rm.apply_all_staged(objects, ApplyOptions())


async def test_a_status_write_does_not_cost_a_dry_run(cluster: Any, kube: KubeClient) -> None:
    ns = cluster.namespace
    verified = VerifiedApplies()
    rm = engine(kube, verified)
    objects = [deployment("web", ns), configmap("cfg", ns)]
    await applied_and_settled(kube, rm, objects, ns)
    for ready in (1, 2):
        rv = (await kube.get("apps/v1", "Deployment", "web", ns))["metadata"]["resourceVersion"]
        await write_status(kube, "web", ns, ready)
        # a new resourceVersion: only the main-resource proof can have spared the dry-run
        assert (await kube.get("apps/v1", "Deployment", "web", ns))["metadata"]["resourceVersion"] != rv
        before = counts(kube)
        change_set = await rm.apply_all_staged(objects, ApplyOptions())
        assert str(change_set) == f"ConfigMap/{ns}/cfg unchanged\nDeployment/{ns}/web unchanged"
        assert delta(kube, before) == {"get": 2}


async def test_the_embedded_controllers_status_resync_is_not_drift(cluster: Any, kube: KubeClient) -> None:
    server = cluster.require_server()
    if not server.cluster.simulate_workloads:
        server.cluster.simulate_workloads = True
    ns = cluster.namespace
    rm = engine(kube, VerifiedApplies())
    objects = [deployment("web", ns)]
    await rm.apply_all_staged(objects, ApplyOptions())
    before = counts(kube)
    await rm.apply_all_staged(objects, ApplyOptions())  # after the simulated controller's two writes
    assert delta(kube, before) == {"get": 1}
    live = await kube.get("apps/v1", "Deployment", "web", ns)
    assert live["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    assert live["metadata"]["generation"] == 1 and live["status"]["observedGeneration"] == 1
    assert server.resync_workload_status(ns) == 1
    before = counts(kube)
    await rm.apply_all_staged(objects, ApplyOptions())
    assert delta(kube, before) == {"get": 1}


async def test_real_edits_after_a_status_write_are_still_dry_run_and_reverted(cluster: Any, kube: KubeClient) -> None:
    """Try to fool the memory: a status write first (so the exact proof is gone), then a real edit."""
    ns = cluster.namespace
    rm = engine(kube, VerifiedApplies())
    objects = [deployment("web", ns)]
    await applied_and_settled(kube, rm, objects, ns)

    # (what, patch, manager, the dry-run's verdict): kubectl-edit's changes of our fields are reverted;
    # another controller's additions are not drift, but they still cost the dry-run that says so
    edits: list[tuple[str, dict[str, Any], str, str]] = [
        ("image edited", {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "evil:1"}]}}}},
         "kubectl-edit", "configured"),
        ("replicas edited", {"spec": {"replicas": 3}}, "kubectl-edit", "configured"),
        ("label added", {"metadata": {"labels": {"extra": "x"}}}, "other-controller", "unchanged"),
        ("annotation added", {"metadata": {"annotations": {"note": "x"}}}, "other-controller", "unchanged"),
    ]
    for what, patch, field_manager, action in edits:
        await write_status(kube, "web", ns, 1)
        await kube.patch("apps/v1", "Deployment", "web", ns, patch, patch_type="merge", field_manager=field_manager)
        before = counts(kube)
        change_set = await rm.apply_all_staged(objects, ApplyOptions())
        assert delta(kube, before).get("patch-dry") == 1, what
        assert str(change_set) == f"Deployment/{ns}/web {action}", what
        live = await kube.get("apps/v1", "Deployment", "web", ns)
        assert live["spec"]["replicas"] == 0, what
        assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27", what
        await settle(kube, "web", ns)
        await rm.apply_all_staged(objects, ApplyOptions())  # re-verify after the controller's answer


async def test_a_recreated_object_is_dry_run_again(cluster: Any, kube: KubeClient) -> None:
    ns = cluster.namespace
    rm = engine(kube, VerifiedApplies())
    objects = [deployment("web", ns)]
    await applied_and_settled(kube, rm, objects, ns)
    await kube.delete("apps/v1", "Deployment", "web", ns, propagation_policy="Background")
    for _ in range(100):
        try:
            await kube.get("apps/v1", "Deployment", "web", ns)
        except Exception:
            break
        await asyncio.sleep(0.1)
    await kube.create(deployment("web", ns, image="other:2"))
    before = counts(kube)
    change_set = await rm.apply_all_staged(objects, ApplyOptions())
    assert str(change_set) == f"Deployment/{ns}/web configured"
    assert delta(kube, before).get("patch-dry") == 1


async def test_new_objects_are_dry_run_before_they_are_read(cluster: Any, kube: KubeClient) -> None:
    """With the previous inventory known, an object new to it costs a dry-run and the apply (no 404 GET);
    one that already exists although new to the inventory is read after the dry-run and adopted."""
    ns = cluster.namespace
    await kube.create(configmap("existing", ns, data={"key": "old"}), field_manager="test-creator")
    rm = engine(kube, VerifiedApplies())
    objects = [configmap("new", ns), configmap("existing", ns)]
    before = counts(kube)
    change_set = await rm.apply_all_staged(objects, ApplyOptions(expected=frozenset()))
    assert {str(e) for e in change_set} == {f"ConfigMap/{ns}/new created", f"ConfigMap/{ns}/existing configured"}
    assert delta(kube, before) == {"patch-dry": 2, "get": 1, "patch": 2}
    assert (await kube.get("v1", "ConfigMap", "existing", ns))["data"] == {"key": "value"}
    # known to the inventory: read first (and here verified: the apply was remembered)
    expected = frozenset(ObjRef.from_object(o) for o in objects)
    before = counts(kube)
    await rm.apply_all_staged(objects, ApplyOptions(expected=expected))
    assert delta(kube, before) == {"get": 2}
