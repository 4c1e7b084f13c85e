"""Large groups of remembered objects are read with one metadata-only list (apply/plan.py ``_list_live``):
what it saves, and that every outcome is the one the GETs gave."""

from __future__ import annotations

from typing import Any

from kustomize_controller.apply.changeset import Action, ChangeSet
from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.apply.plan import LIST_MIN_OBJECTS
from kustomize_controller.apply.selectors import owner_labels
from kustomize_controller.apply.verified import VerifiedApplies
from kustomize_controller.kube.errors import ForbiddenError
from kustomize_controller.runtime.clock import FakeClock
from tests.unit.apply.fakes import Call, FakeClient, cm

OWNER = owner_labels("app", "flux-system")
N = LIST_MIN_OBJECTS * 2 + 3


def objects(n: int = N, **data: str) -> list[dict[str, Any]]:
    return [cm(f"cm-{i:03d}", labels=dict(OWNER), data={"i": str(i), **data}) for i in range(n)]


def options(inventory: ChangeSet, **kw: Any) -> ApplyOptions:
    return ApplyOptions(expected=frozenset(e.ref for e in inventory), owner=OWNER, **kw)


def verbs(calls: list[Call]) -> dict[str, int]:
    out: dict[str, int] = {}
    for call in calls:
        verb = f"{call.verb}{' (dry-run)' if call.dry_run else ''}"
        out[verb] = out.get(verb, 0) + 1
    return out


async def applied(n: int = N) -> tuple[FakeClient, ResourceManager, ChangeSet]:
    client = FakeClient()
    rm = ResourceManager(client=client, clock=FakeClock(), concurrency=4, verified=VerifiedApplies())
    inventory = await rm.apply_all_staged(objects(n), ApplyOptions(expected=frozenset(), owner=OWNER))
    return client, rm, inventory


async def test_a_noop_of_a_large_group_costs_one_list_and_nothing_else() -> None:
    client, rm, inventory = await applied()
    mark = len(client.calls)
    change_set = await rm.apply_all_staged(objects(), options(inventory))
    assert verbs(client.calls[mark:]) == {"list": 1}
    assert [e.action for e in change_set] == [Action.UNCHANGED] * N
    assert [e.ref for e in change_set] == [e.ref for e in inventory]  # the apply order, as with GETs


async def test_an_object_edited_out_of_band_is_read_whole_dry_run_and_reverted() -> None:
    client, rm, inventory = await applied()
    key = ("", "ConfigMap", "default", "cm-007")
    client.seed({**client.objects[key], "data": {"i": "edited"}})  # a new resourceVersion, as any write
    mark = len(client.calls)
    change_set = await rm.apply_all_staged(objects(), options(inventory))
    assert verbs(client.calls[mark:]) == {"list": 1, "get": 1, "apply (dry-run)": 1, "apply": 1}
    assert [str(e) for e in change_set.changes()] == ["ConfigMap/default/cm-007 configured"]
    assert client.objects[key]["data"] == {"i": "7"}


async def test_an_object_that_lost_its_owner_labels_or_was_deleted_is_read_whole() -> None:
    client, rm, inventory = await applied()
    relabelled, deleted = ("", "ConfigMap", "default", "cm-003"), ("", "ConfigMap", "default", "cm-004")
    client.seed({**client.objects[relabelled], "metadata": {**client.objects[relabelled]["metadata"], "labels": {}}})
    del client.objects[deleted]
    change_set = await rm.apply_all_staged(objects(), options(inventory))
    assert [str(e) for e in change_set.changes()] == [
        "ConfigMap/default/cm-003 configured", "ConfigMap/default/cm-004 created"]
    assert client.objects[relabelled]["metadata"]["labels"] == OWNER


async def test_a_changed_manifest_is_dry_run_against_the_object_read_whole() -> None:
    client, rm, inventory = await applied()
    changed = objects()
    changed[5]["data"]["i"] = "new"
    mark = len(client.calls)
    change_set = await rm.apply_all_staged(changed, options(inventory))
    assert verbs(client.calls[mark:]) == {"list": 1, "get": 1, "apply (dry-run)": 1, "apply": 1}
    assert [str(e) for e in change_set.changes()] == ["ConfigMap/default/cm-005 configured"]


async def test_skip_rules_are_decided_from_the_object_read_whole() -> None:
    client, rm, inventory = await applied()
    key = ("", "ConfigMap", "default", "cm-002")
    meta = client.objects[key]["metadata"]
    client.seed({**client.objects[key], "metadata": {
        **meta, "annotations": {"kustomize.toolkit.fluxcd.io/reconcile": "disabled"}}})
    mark = len(client.calls)
    change_set = await rm.apply_all_staged(objects(), options(inventory))
    assert verbs(client.calls[mark:]) == {"list": 1, "get": 1}
    assert next(e for e in change_set if e.ref.name == "cm-002").action is Action.SKIPPED


async def test_small_groups_unproven_objects_and_failing_lists_are_read_one_by_one() -> None:
    client, rm, inventory = await applied(LIST_MIN_OBJECTS - 1)
    mark = len(client.calls)
    await rm.apply_all_staged(objects(LIST_MIN_OBJECTS - 1), options(inventory))
    assert verbs(client.calls[mark:]) == {"get": LIST_MIN_OBJECTS - 1}

    client, rm, inventory = await applied()
    client.faults[("list", "ConfigMap", False)] = ForbiddenError("forbidden", status=403)
    mark = len(client.calls)
    change_set = await rm.apply_all_staged(objects(), options(inventory))
    assert verbs(client.calls[mark:]) == {"list": 1, "get": N}
    assert [e.action for e in change_set] == [Action.UNCHANGED] * N

    # a new process: nothing remembered, nothing a list could prove
    fresh = ResourceManager(client=client, clock=FakeClock(), concurrency=4, verified=VerifiedApplies())
    mark = len(client.calls)
    await fresh.apply_all_staged(objects(), options(inventory))
    assert verbs(client.calls[mark:]) == {"get": N, "apply (dry-run)": N}


async def test_no_list_without_owner_labels_or_an_inventory() -> None:
    client, rm, inventory = await applied()
    mark = len(client.calls)
    await rm.apply_all_staged(objects(), ApplyOptions(expected=frozenset(e.ref for e in inventory)))
    await rm.apply_all_staged(objects(), ApplyOptions(owner=OWNER))
    assert verbs(client.calls[mark:]) == {"get": 2 * N}


async def test_a_list_never_matches_an_object_of_another_namespace() -> None:
    client, rm, inventory = await applied()
    # the same names in another namespace, ours too: a namespace-less list would return both
    for obj in objects():
        client.seed({**obj, "metadata": {**obj["metadata"], "namespace": "other"}})
    change_set = await rm.apply_all_staged(objects(), options(inventory))
    assert {e.ref.namespace for e in change_set} == {"default"}
    assert all(e.action is Action.UNCHANGED for e in change_set)
    assert ObjRef(group="", kind="ConfigMap", namespace="default", name="cm-000") in {e.ref for e in change_set}
