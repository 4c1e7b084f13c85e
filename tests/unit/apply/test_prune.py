from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kustomize_controller.apply.changeset import Action
from kustomize_controller.apply.errors import PruneError
from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.apply.prune import StaleObject, delete_all, wait_for_termination
from kustomize_controller.apply.selectors import owner_labels
from kustomize_controller.kube.errors import ForbiddenError, InternalServerError, NotFoundError
from kustomize_controller.runtime.clock import FakeClock
from tests.unit.apply.fakes import FakeClient, cm

OWNER = owner_labels("apps", "flux-system")


def owned(name: str, **extra: Any) -> dict[str, Any]:
    labels = {**OWNER, **extra.pop("labels", {})}
    return cm(name, labels=labels, **extra)


def stale(name: str, kind: str = "ConfigMap", group: str = "", ns: str = "default") -> StaleObject:
    return StaleObject(ObjRef(group, kind, ns, name), "v1")


@pytest.mark.parametrize(
    ("live", "action", "deleted"),
    [
        (owned("x"), Action.DELETED, True),
        (None, Action.DELETED, False),
        (cm("x"), Action.SKIPPED, False),  # no owner labels
        (cm("x", labels={"kustomize.toolkit.fluxcd.io/name": "apps"}), Action.SKIPPED, False),  # one label only
        (cm("x", labels={**OWNER, "kustomize.toolkit.fluxcd.io/name": "other"}), Action.SKIPPED, False),
        (owned("x", annotations={"kustomize.toolkit.fluxcd.io/prune": "Disabled"}), Action.SKIPPED, False),
        (owned("x", labels={"kustomize.toolkit.fluxcd.io/reconcile": "disabled"}), Action.SKIPPED, False),
        (owned("x", annotations={"kustomize.toolkit.fluxcd.io/ssa": "Ignore"}), Action.SKIPPED, False),
    ],
)
async def test_prune_selection(live: dict[str, Any] | None, action: Action, deleted: bool) -> None:
    client = FakeClient()
    if live is not None:
        client.seed(live)
    cs = await delete_all(client, [stale("x")], owner=OWNER)
    assert [e.action for e in cs] == [action]
    assert any(c.verb == "delete" for c in client.calls) is deleted
    if deleted:
        assert [c.body for c in client.calls if c.verb == "delete"] == ["Background"]


async def test_only_listed_objects_are_touched_in_reverse_kind_order() -> None:
    client = FakeClient()
    for name in ("a", "b", "keep"):
        client.seed(owned(name))
    client.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": OWNER}})
    cs = await delete_all(client, [stale("a"), stale("default", "Namespace", ns=""), stale("b")], owner=OWNER)
    assert str(cs) == "ConfigMap/default/b deleted\nConfigMap/default/a deleted\nNamespace/default deleted"
    assert ("", "ConfigMap", "default", "keep") in client.objects
    touched = {c.key[3] for c in client.calls}
    assert "keep" not in touched


async def test_errors_are_aggregated_and_the_rest_still_processed() -> None:
    client = FakeClient()
    for name in ("a", "b", "c"):
        client.seed(owned(name))
    client.faults[("delete", "a", False)] = ForbiddenError("denied by webhook", status=403)
    client.faults[("get", "b", False)] = InternalServerError("etcd down", status=500)
    with pytest.raises(PruneError) as info:
        await delete_all(client, [stale("a"), stale("b"), stale("c")], owner=OWNER)
    assert str(info.value) == (
        "delete failed, errors: ConfigMap/default/b query failed: etcd down;"
        "ConfigMap/default/a delete failed: denied by webhook;"
    )
    assert info.value.change_set.to_map() == {
        "ConfigMap/default/c": "deleted",
        "ConfigMap/default/b": "unknown",
        "ConfigMap/default/a": "unknown",
    }
    assert ("", "ConfigMap", "default", "a") in client.objects


async def test_unknown_kind_counts_as_deleted() -> None:
    client = FakeClient(unknown_kinds={"Widget"})
    cs = await delete_all(client, [stale("w", "Widget", "example.com")], owner=OWNER)
    assert [e.action for e in cs] == [Action.DELETED]


async def test_wait_for_termination() -> None:
    client = FakeClient(linger_gets=3)
    client.seed(owned("a"))
    cs = await delete_all(client, [stale("a")], owner=OWNER)
    clock = FakeClock()
    task = asyncio.create_task(wait_for_termination(client, cs, clock=clock, timeout_seconds=30))
    for _ in range(5):
        await clock.advance(2)
    await task
    assert ("", "ConfigMap", "default", "a") not in client.objects


async def test_wait_for_termination_timeout() -> None:
    client = FakeClient(linger_gets=1000)
    client.seed(owned("a"))
    cs = await delete_all(client, [stale("a")], owner=OWNER)
    clock = FakeClock()
    task = asyncio.create_task(wait_for_termination(client, cs, clock=clock, timeout_seconds=5))
    for _ in range(5):
        await clock.advance(2)
    with pytest.raises(PruneError, match="ConfigMap/default/a termination timeout"):
        await task


async def test_an_object_already_gone_is_reported_deleted_as_upstream_and_named_to_the_caller() -> None:
    """Upstream's DeleteAll counts a NotFound as ``deleted`` (its event says so); the caller is told which of
    them were not deleted by this prune — absent at the GET, or gone by the DELETE (deleted in between)."""
    client = FakeClient()
    client.seed(owned("present"))
    client.seed(owned("racing"))
    client.faults[("delete", "racing", False)] = NotFoundError("configmaps \"racing\" not found", status=404)
    gone: list[StaleObject] = []
    cs = await delete_all(client, [stale("absent"), stale("present"), stale("racing")], owner=OWNER,
                          already_gone=gone.append)
    assert [(e.ref.name, e.action) for e in cs] == [
        ("racing", Action.DELETED), ("present", Action.DELETED), ("absent", Action.DELETED)]
    assert [s.ref.name for s in gone] == ["racing", "absent"]
