"""``provably_unchanged``: the managed fields prove (or not) that the desired state is the one last applied."""

from __future__ import annotations

import copy
from typing import Any

from kustomize_controller.apply.ownership import owned_by_others, owned_leaves, provably_unchanged

ME = "kustomize-controller"
OURS: dict[str, Any] = {
    "f:metadata": {"f:labels": {"f:app": {}}},
    "f:spec": {
        "f:replicas": {},
        "f:template": {"f:spec": {"f:containers": {'k:{"name":"main"}': {".": {}, "f:name": {}, "f:image": {}}}}},
    },
}


def deploy(*, replicas: int = 1, image: str = "nginx:1", managers: list[tuple[str, str, dict[str, Any]]]) -> Any:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"},
                     "managedFields": [{"manager": m, "operation": op, "fieldsV1": f} for m, op, f in managers]},
        "spec": {"replicas": replicas,
                 "template": {"spec": {"containers": [{"name": "main", "image": image}, {"name": "side"}]}}},
    }


def without_replicas(fields: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(fields)
    del out["f:spec"]["f:replicas"]
    return out


SCALED = [(ME, "Apply", without_replicas(OURS)), ("kubectl", "Update", {"f:spec": {"f:replicas": {}}})]


def test_leaves_follow_list_keys() -> None:
    leaves = owned_leaves(deploy(managers=[(ME, "Apply", OURS)]), manager=ME)
    assert leaves is not None
    key = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"main"}')
    assert leaves[(*key, "f:image")] == "nginx:1"
    assert leaves[(*key, ".")] is True
    assert leaves[("f:spec", "f:replicas")] == 1
    assert owned_leaves(deploy(managers=[("other", "Apply", OURS)]), manager=ME) is None
    assert owned_by_others(deploy(managers=SCALED), manager=ME) == {("f:spec", "f:replicas")}


def test_in_sync_and_unchanged() -> None:
    obj = deploy(managers=[(ME, "Apply", OURS)])
    assert provably_unchanged(obj, obj, manager=ME)


def test_a_field_taken_by_another_manager_is_drift() -> None:
    live = deploy(replicas=3, managers=SCALED)
    dry_run = deploy(replicas=1, managers=[(ME, "Apply", OURS), ("kubectl", "Update", {})])
    assert provably_unchanged(live, dry_run, manager=ME)


def test_a_changed_value_we_own_is_a_change() -> None:
    live = deploy(replicas=3, managers=SCALED)
    dry_run = deploy(replicas=1, image="nginx:2", managers=[(ME, "Apply", OURS)])
    assert not provably_unchanged(live, dry_run, manager=ME)


def test_a_field_removed_from_the_manifest_is_a_change() -> None:
    live = deploy(managers=[(ME, "Apply", OURS)])
    fields = copy.deepcopy(OURS)
    del fields["f:metadata"]
    assert not provably_unchanged(live, deploy(managers=[(ME, "Apply", fields)]), manager=ME)


def test_a_new_field_nobody_owns_is_a_change() -> None:
    live = deploy(managers=[(ME, "Apply", without_replicas(OURS))])
    dry_run = deploy(managers=[(ME, "Apply", OURS)])
    assert not provably_unchanged(live, dry_run, manager=ME)


def test_without_our_apply_entry_nothing_is_proven() -> None:
    live = deploy(managers=[("someone", "Update", OURS)])
    assert not provably_unchanged(live, deploy(managers=[(ME, "Apply", OURS)]), manager=ME)


def test_a_list_item_that_vanished_is_not_proven() -> None:
    live = deploy(managers=[(ME, "Apply", OURS)])
    live["spec"]["template"]["spec"]["containers"] = [{"name": "side"}]
    dry_run = deploy(managers=[(ME, "Apply", OURS)])
    assert not provably_unchanged(live, dry_run, manager=ME)
