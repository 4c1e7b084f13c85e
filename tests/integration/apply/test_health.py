"""Health checks against the API: statuses read from the server, the waiter stepped by a FakeClock."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from kustomize_controller.api.kustomization import CustomHealthCheck
from kustomize_controller.apply.cel import build_status_readers
from kustomize_controller.apply.errors import HealthCheckError
from kustomize_controller.apply.health import (
    StatusPoller,
    jobs_with_ttl,
    targets_from_change_set,
    wait_for_set,
)
from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import NotFoundError
from kustomize_controller.runtime.clock import FakeClock
from tests.integration.apply.test_staged_apply import deployment

pytestmark = pytest.mark.integration


async def until_sleeping(clock: FakeClock, task: asyncio.Task[None]) -> None:
    for _ in range(2000):
        if clock.pending_sleepers or task.done():
            return
        await asyncio.sleep(0.001)


async def test_deployment_becomes_healthy_when_its_status_says_so(
    cluster: Any, kube: KubeClient, manager: ResourceManager
) -> None:
    ns = cluster.namespace
    cs = await manager.apply_all_staged([deployment("web", ns)], ApplyOptions())
    clock = FakeClock()
    poller = StatusPoller(client=kube, clock=clock)
    task = asyncio.create_task(
        wait_for_set(targets_from_change_set(cs), poller=poller, clock=clock, timeout_seconds=60)
    )
    await until_sleeping(clock, task)
    assert not task.done()
    live = await kube.get("apps/v1", "Deployment", "web", ns)
    status = {
        "observedGeneration": live["metadata"].get("generation", 1),
        "replicas": 1,
        "updatedReplicas": 1,
        "readyReplicas": 1,
        "availableReplicas": 1,
        "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
        ],
    }
    await kube.patch("apps/v1", "Deployment", "web", ns, {"status": status}, patch_type="merge", subresource="status")
    await clock.advance(5)
    await asyncio.wait_for(task, 10)


async def test_timeout_names_the_unhealthy_objects(cluster: Any, kube: KubeClient, manager: ResourceManager) -> None:
    ns = cluster.namespace
    cs = await manager.apply_all_staged([deployment("web", ns)], ApplyOptions())
    clock = FakeClock()
    task = asyncio.create_task(
        wait_for_set(
            targets_from_change_set(cs),
            poller=StatusPoller(client=kube, clock=clock),
            clock=clock,
            timeout_seconds=30,
        )
    )
    for _ in range(7):
        await until_sleeping(clock, task)
        await clock.advance(5)
    with pytest.raises(HealthCheckError) as info:
        await asyncio.wait_for(task, 10)
    assert str(info.value) == f"timeout waiting for: [Deployment/{ns}/web status: 'InProgress']"


async def test_cel_health_check_on_a_custom_resource(cluster: Any, kube: KubeClient, manager: ResourceManager) -> None:
    ns = cluster.namespace
    from tests.integration.apply.test_staged_apply import crd

    group = f"{ns}.example.com"  # a cluster-scoped name of its own, deleted at the end
    widget = {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "g", "namespace": ns}}
    try:
        cs = await manager.apply_all_staged([crd(group, "Gadget", "gadgets"), widget], ApplyOptions())
        readers = build_status_readers(
            [
                CustomHealthCheck.model_validate(
                    {
                        "apiVersion": f"{group}/v1",
                        "kind": "Gadget",
                        "current": "has(status.phase) && status.phase == 'Ready'",
                        "failed": "has(status.phase) && status.phase == 'Broken'",
                    }
                )
            ]
        )
        targets = [t for t in targets_from_change_set(cs) if t.ref.kind == "Gadget"]
        await kube.patch(f"{group}/v1", "Gadget", "g", ns, {"status": {"phase": "Broken"}}, patch_type="merge")
        clock = FakeClock()
        with pytest.raises(HealthCheckError) as info:
            await wait_for_set(
                targets, poller=StatusPoller(client=kube, clock=clock, readers=readers), clock=clock,
                timeout_seconds=30
            )
        assert str(info.value) == f"failed early due to stalled resources: [Gadget/{ns}/g status: 'Failed']"
    finally:
        with contextlib.suppress(NotFoundError):
            await kube.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", f"gadgets.{group}")


async def test_job_with_ttl_gone_counts_as_done(cluster: Any, kube: KubeClient) -> None:
    ns = cluster.namespace
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "migrate", "namespace": ns},
        "spec": {"ttlSecondsAfterFinished": 0, "template": {"spec": {"containers": []}}},
    }
    ttl = jobs_with_ttl([job])
    clock = FakeClock()
    await wait_for_set(
        ttl, poller=StatusPoller(client=kube, clock=clock), clock=clock, timeout_seconds=30, jobs_with_ttl=ttl
    )
