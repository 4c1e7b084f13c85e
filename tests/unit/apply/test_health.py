from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kustomize_controller.api.kustomization import CustomHealthCheck
from kustomize_controller.apply.cel import build_status_readers
from kustomize_controller.apply.errors import HealthCheckError
from kustomize_controller.apply.health import (
    HealthTarget,
    StatusPoller,
    jobs_with_ttl,
    label_selector_string,
    wait_for_set,
)
from kustomize_controller.apply.kstatus import Status
from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.kube.errors import ForbiddenError
from kustomize_controller.runtime.clock import FakeClock
from tests.unit.apply.fakes import FakeClient


async def until_sleeping(clock: FakeClock) -> None:
    """Let the waiter run until it sleeps (or finishes) so that time steps are deterministic."""
    for _ in range(100):
        if clock.pending_sleepers:
            return
        await asyncio.sleep(0)


def widget(name: str, ready: str | None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "app"},
    }
    if ready is not None:
        obj["status"] = {"conditions": [{"type": "Ready", "status": ready}]}
    return obj


def target(name: str, kind: str = "Widget", group: str = "example.com") -> HealthTarget:
    return HealthTarget.of(ObjRef(group, kind, "app", name), "v1")


async def run_wait(
    client: FakeClient, targets: list[HealthTarget], clock: FakeClock, *, steps: int, step: float = 5.0, **kw: Any
) -> asyncio.Task[None]:
    poller = StatusPoller(client=client, clock=clock, readers=kw.pop("readers", None))
    task = asyncio.create_task(wait_for_set(targets, poller=poller, clock=clock, **kw))
    await until_sleeping(clock)
    for _ in range(steps):
        await clock.advance(step)
    return task


async def test_success_when_all_current() -> None:
    client = FakeClient()
    client.seed(widget("a", "True"))
    clock = FakeClock()
    task = await run_wait(client, [target("a")], clock, steps=0, timeout_seconds=30)
    await task


async def test_becomes_ready_on_a_later_poll() -> None:
    client = FakeClient()
    client.seed(widget("a", "False"))
    clock = FakeClock()
    poller = StatusPoller(client=client, clock=clock)
    task = asyncio.create_task(wait_for_set([target("a")], poller=poller, clock=clock, timeout_seconds=30))
    await until_sleeping(clock)
    await clock.advance(5)
    assert not task.done()
    client.seed(widget("a", "True"))
    await clock.advance(5)
    await task
    assert len([c for c in client.calls if c.verb == "get"]) == 3  # t=0, 5, 10


async def test_timeout_message_lists_unhealthy_in_order() -> None:
    client = FakeClient()
    client.seed(widget("b", "False"))
    client.seed(widget("a", "True"))
    clock = FakeClock()
    task = await run_wait(client, [target("b"), target("a"), target("missing")], clock, steps=7, timeout_seconds=30)
    with pytest.raises(HealthCheckError) as info:
        await task
    assert str(info.value) == (
        "timeout waiting for: [Widget/app/b status: 'InProgress', Widget/app/missing status: 'NotFound']"
    )


async def test_fail_fast_on_failed() -> None:
    client = FakeClient()
    stalled = widget("s", None)
    stalled["status"] = {"conditions": [{"type": "Stalled", "status": "True", "reason": "Bad"}]}
    client.seed(stalled)
    client.seed(widget("p", "False"))
    clock = FakeClock()
    task = await run_wait(client, [target("s"), target("p")], clock, steps=0, timeout_seconds=30)
    with pytest.raises(
        HealthCheckError, match=r"^failed early due to stalled resources: \[Widget/app/s status: 'Failed'\]$"
    ):
        await task


async def test_without_fail_fast_waits_for_timeout() -> None:
    client = FakeClient()
    stalled = widget("s", None)
    stalled["status"] = {"conditions": [{"type": "Stalled", "status": "True"}]}
    client.seed(stalled)
    client.seed(widget("p", "False"))
    clock = FakeClock()
    task = await run_wait(client, [target("s"), target("p")], clock, steps=1, timeout_seconds=30, fail_fast=False)
    assert not task.done()
    for _ in range(6):
        await clock.advance(5)
    with pytest.raises(HealthCheckError, match=r"^timeout waiting for: "):
        await task


async def test_terminal_set_stops_even_without_fail_fast() -> None:
    client = FakeClient()
    stalled = widget("s", None)
    stalled["status"] = {"conditions": [{"type": "Stalled", "status": "True"}]}
    client.seed(stalled)
    client.seed(widget("ok", "True"))
    clock = FakeClock()
    task = await run_wait(client, [target("s"), target("ok")], clock, steps=0, timeout_seconds=30, fail_fast=False)
    with pytest.raises(HealthCheckError, match="failed early"):
        await task


async def test_unknown_carries_the_error() -> None:
    client = FakeClient()
    client.faults[("get", "a", False)] = ForbiddenError("widgets is forbidden", status=403)
    clock = FakeClock()
    task = await run_wait(client, [target("a")], clock, steps=3, timeout_seconds=10)
    with pytest.raises(HealthCheckError) as info:
        await task
    assert str(info.value) == "timeout waiting for: [Widget/app/a status: 'Unknown': widgets is forbidden]"


async def test_job_with_ttl_that_vanished_counts_as_done() -> None:
    client = FakeClient()
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "app"},
        "spec": {"ttlSecondsAfterFinished": 10},
    }
    ttl = jobs_with_ttl([job])
    assert ttl == [target("j", "Job", "batch")]
    clock = FakeClock()
    task = await run_wait(client, [target("j", "Job", "batch")], clock, steps=0, timeout_seconds=10, jobs_with_ttl=ttl)
    await task


async def test_running_job_is_not_healthy() -> None:
    client = FakeClient()
    client.seed(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "j", "namespace": "app"},
            "status": {"startTime": "2026-01-01T00:00:00Z", "active": 1},
        }
    )
    clock = FakeClock()
    task = await run_wait(client, [target("j", "Job", "batch")], clock, steps=3, timeout_seconds=10)
    with pytest.raises(HealthCheckError, match=r"Job/app/j status: 'InProgress'"):
        await task


async def test_cel_reader_is_used_for_its_group() -> None:
    client = FakeClient()
    obj = widget("a", None)
    obj["status"] = {"phase": "Done"}
    client.seed(obj)
    readers = build_status_readers(
        [CustomHealthCheck.model_validate({"apiVersion": "example.com/v1", "current": "status.phase == 'Done'"})]
    )
    clock = FakeClock()
    task = await run_wait(client, [target("a")], clock, steps=0, timeout_seconds=10, readers=readers)
    await task


async def test_replicaset_with_crashlooping_pod_fails() -> None:
    client = FakeClient()
    client.seed(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "rs", "namespace": "app"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}},
            "status": {},
        }
    )
    client.seed(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p1", "namespace": "app", "labels": {"app": "web"}},
            "status": {
                "phase": "Running",
                "containerStatuses": [{"name": "c", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}],
            },
        }
    )
    clock = FakeClock()
    poller = StatusPoller(client=client, clock=clock)
    result = await poller.read(target("rs", "ReplicaSet", "apps"))
    assert (result.status, result.message) == (Status.FAILED, "1 pods have failed")


def test_label_selector_string() -> None:
    assert (
        label_selector_string(
            {
                "matchLabels": {"b": "2", "a": "1"},
                "matchExpressions": [
                    {"key": "t", "operator": "In", "values": ["x", "y"]},
                    {"key": "u", "operator": "DoesNotExist"},
                ],
            }
        )
        == "a=1,b=2,t in (x,y),!u"
    )
    assert label_selector_string({}) is None
    assert label_selector_string(None) is None


async def test_empty_target_list_returns_at_once() -> None:
    clock = FakeClock()
    await wait_for_set([], poller=StatusPoller(client=FakeClient(), clock=clock), clock=clock, timeout_seconds=1)


def test_targets_from_change_set_skip_skipped_and_self() -> None:
    from kustomize_controller.apply.changeset import Action, ChangeSet, ChangeSetEntry
    from kustomize_controller.apply.health import targets_from_change_set

    me = ObjRef("kustomize.toolkit.fluxcd.io", "Kustomization", "flux-system", "apps")
    cs = ChangeSet(
        [
            ChangeSetEntry(ObjRef("apps", "Deployment", "app", "web"), "v1", Action.UNCHANGED),
            ChangeSetEntry(ObjRef("", "ConfigMap", "app", "cfg"), "v1", Action.SKIPPED),
            ChangeSetEntry(me, "v1", Action.CONFIGURED),
            ChangeSetEntry(ObjRef("", "Namespace", "", "app"), "v1", Action.CREATED),
        ]
    )
    assert [str(t) for t in targets_from_change_set(cs, exclude=me)] == ["Deployment/app/web", "Namespace/app"]
    assert targets_from_change_set(cs, exclude=me)[0].api_version == "apps/v1"


def test_targets_from_references_defaults() -> None:
    from kustomize_controller.api.meta import NamespacedObjectKindReference
    from kustomize_controller.apply.health import targets_from_references

    refs = [
        NamespacedObjectKindReference(kind="Deployment", name="web", namespace="app"),
        NamespacedObjectKindReference(api_version="v1", kind="Namespace", name="app"),
        NamespacedObjectKindReference(kind="Kustomization", name="apps", namespace="flux-system"),
    ]
    me = ObjRef("kustomize.toolkit.fluxcd.io", "Kustomization", "flux-system", "apps")
    targets = targets_from_references(refs, exclude=me)
    assert [(t.api_version, str(t)) for t in targets] == [
        ("apps/v1", "Deployment/app/web"),
        ("v1", "Namespace/app"),
    ]


async def test_malformed_object_is_unknown_not_a_crash() -> None:
    client = FakeClient()
    client.seed(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "s", "namespace": "app"},
            "spec": {"replicas": "three"},
            "status": {"conditions": [{"type": "Ready", "status": 1}]},
        }
    )
    client.seed(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "r", "namespace": "app"},
            "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]}},
        }
    )
    poller = StatusPoller(client=client, clock=FakeClock())
    sts = await poller.read(target("s", "StatefulSet", "apps"))
    rs = await poller.read(target("r", "ReplicaSet", "apps"))
    assert sts.status is Status.IN_PROGRESS  # replicas falls back to the default like GetIntField
    assert rs.status is Status.IN_PROGRESS  # unusable selector: the pods are not consulted
    assert label_selector_string({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}) is None
