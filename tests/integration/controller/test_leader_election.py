"""Leader election with two controller instances (upstream ``--enable-leader-election``): only the
holder of the ``kustomize-controller-leader-election`` Lease reconciles; when it stops (releasing the
lease) the other takes over. Each instance runs as its own user so the API's request log tells who
wrote what."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.integration.controller.conftest import ControllerEnv, Instance
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


def instance(env: ControllerEnv, tmp_path: Path, user: str, *, renew_deadline: float = 20.0) -> Instance:
    """A controller instance renewing its lease every 200 ms. The lease lasts 1.5 renew deadlines: the
    default deadline (20 s) is far beyond any stall of a loaded machine, so a leader never loses its
    lease (and a standby never takes an unreleased one) by accident; a handover goes through the
    release a graceful stop writes, which the standby sees at its next 200 ms retry."""
    return env.instance(user, tmp_path, enable_leader_election=True,
                        leader_election_lease_duration=timedelta(seconds=1.5 * renew_deadline),
                        leader_election_renew_deadline=timedelta(seconds=renew_deadline),
                        leader_election_retry_period=timedelta(milliseconds=200))


def status_writers(env: ControllerEnv) -> set[str]:
    return {r.user for r in env.server.requests.writes(resource="kustomizations") if r.subresource == "status"}


def applied_by(env: ControllerEnv) -> set[str]:
    return {r.user for r in env.server.requests.writes(resource="configmaps")}


async def test_only_the_leader_reconciles_and_the_other_takes_over(env: ControllerEnv, tmp_path: Path) -> None:
    ns = env.namespace
    first, second = instance(env, tmp_path, "controller-a"), instance(env, tmp_path, "controller-b")
    try:
        first.start()
        await first.wait_leader()
        second.start()
        artifact = await env.publish({"cm.yaml": configmap("a", {"v": "1"})})
        await env.create(env.kustomization(targetNamespace=ns))
        await env.wait_ready(revision=artifact["revision"])
        assert second.manager is not None and not second.manager.is_leader
        assert status_writers(env) == {"controller-a"}
        assert applied_by(env) == {"controller-a"}
        lease: dict[str, Any] = await env.client.get(
            "coordination.k8s.io/v1", "Lease", "kustomize-controller-leader-election", ns)
        assert lease["spec"]["holderIdentity"]

        assert await first.stop() == 0  # graceful: the lease is released
        await second.wait_leader()
        env.server.requests.clear()
        update = await env.publish({"cm.yaml": configmap("a", {"v": "2"})})
        await env.wait_ready(revision=update["revision"])
        assert (await env.get("v1", "ConfigMap", "a"))["data"] == {"v": "2"}
        assert status_writers(env) == {"controller-b"}
        assert applied_by(env) == {"controller-b"}
    finally:
        await first.stop()
        await second.stop()


async def test_lost_lease_exits_with_status_1(env: ControllerEnv, tmp_path: Path) -> None:
    leader = instance(env, tmp_path, "controller-a", renew_deadline=2)
    try:
        leader.start()
        await leader.wait_leader()
        # the API server refuses every lease request: renewals fail until the renew deadline passes
        env.server.faults.fail(path=r"/leases/", status=500, count=None)
        assert leader.task is not None
        assert await asyncio.wait_for(leader.task, 60) == 1
    finally:
        env.server.faults.clear()
        await leader.stop()
