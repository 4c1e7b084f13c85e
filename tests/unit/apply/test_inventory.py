from __future__ import annotations

from kustomize_controller.api.inventory import ResourceInventory, ResourceRef
from kustomize_controller.apply.changeset import Action, ChangeSet, ChangeSetEntry
from kustomize_controller.apply.inventory import (
    from_change_set,
    inventory_objects,
    merge_survivors,
    stale_objects,
    with_objects,
)
from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.apply.prune import StaleObject

NS = ObjRef("", "Namespace", "", "app")
CR = ObjRef("rbac.authorization.k8s.io", "ClusterRole", "", "system:reader")
DEP = ObjRef("apps", "Deployment", "app", "web")
CM = ObjRef("", "ConfigMap", "app", "cfg")


def entry(ref: ObjRef, version: str, action: Action) -> ChangeSetEntry:
    return ChangeSetEntry(ref=ref, version=version, action=action)


def inv(*pairs: tuple[str, str]) -> ResourceInventory:
    return ResourceInventory(entries=[ResourceRef(id=i, v=v) for i, v in pairs])


def test_from_change_set_keeps_order_versions_and_skipped_entries() -> None:
    cs = ChangeSet(
        [
            entry(NS, "v1", Action.CREATED),
            entry(CR, "v1", Action.UNCHANGED),
            entry(CM, "v1", Action.SKIPPED),
            entry(DEP, "v1", Action.CONFIGURED),
            entry(DEP, "v1", Action.CONFIGURED),  # duplicates collapse
        ]
    )
    assert [(e.id, e.v) for e in from_change_set(cs).entries] == [
        ("_app__Namespace", "v1"),
        ("_system__reader_rbac.authorization.k8s.io_ClusterRole", "v1"),
        ("app_cfg__ConfigMap", "v1"),
        ("app_web_apps_Deployment", "v1"),
    ]


def test_stale_objects_are_old_minus_new_with_old_version() -> None:
    old = inv(("_app__Namespace", "v1"), ("app_web_apps_Deployment", "v1beta1"), ("app_cfg__ConfigMap", "v1"))
    new = inv(("_app__Namespace", "v1"), ("app_cfg__ConfigMap", "v1"))
    assert stale_objects(old, new) == [StaleObject(DEP, "v1beta1")]
    assert stale_objects(old, old) == []
    assert stale_objects(None, new) == []
    assert [s.ref for s in stale_objects(old, None)] == [NS, DEP, CM]


def test_version_change_is_not_stale() -> None:
    old = inv(("app_web_apps_Deployment", "v1beta1"))
    new = inv(("app_web_apps_Deployment", "v1"))
    assert stale_objects(old, new) == []


def test_unparseable_ids_are_never_pruned() -> None:
    old = inv(("garbage", "v1"), ("app_web_apps_Deployment", "v1"))
    assert stale_objects(old, inv()) == [StaleObject(DEP, "v1")]
    assert inventory_objects(old) == [StaleObject(DEP, "v1")]


def test_rbac_names_round_trip() -> None:
    (obj,) = inventory_objects(inv(("_system__reader_rbac.authorization.k8s.io_ClusterRole", "v1")))
    assert obj.ref == CR


def test_merge_survivors_keeps_failed_deletes_only() -> None:
    new = inv(("_app__Namespace", "v1"))
    stale = [StaleObject(DEP, "v1"), StaleObject(CM, "v1"), StaleObject(CR, "v1")]
    prune_cs = ChangeSet(
        [entry(DEP, "v1", Action.UNKNOWN), entry(CM, "v1", Action.DELETED), entry(CR, "v1", Action.SKIPPED)]
    )
    merged = merge_survivors(new, stale, prune_cs)
    assert [e.id for e in merged.entries] == ["_app__Namespace", "app_web_apps_Deployment"]
    assert [e.id for e in new.entries] == ["_app__Namespace"]  # input not mutated


def test_with_objects_appends_what_the_inventory_lacks() -> None:
    old = inv(("app_web_apps_Deployment", "v1beta1"), ("app_cfg__ConfigMap", "v1"))
    web = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "app"}}
    cfg = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "app"}}
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "app"}}
    assert with_objects(old, [web, cfg]) is None  # nothing new: no write needed
    grown = with_objects(old, [ns, web, cfg, ns])
    assert grown is not None
    assert [(e.id, e.v) for e in grown.entries] == [
        ("app_web_apps_Deployment", "v1beta1"), ("app_cfg__ConfigMap", "v1"), ("_app__Namespace", "v1")]
    assert [(e.id, e.v) for e in (with_objects(None, [cfg]) or inv()).entries] == [("app_cfg__ConfigMap", "v1")]
    assert stale_objects(grown, inv(("app_cfg__ConfigMap", "v1"))) == [
        StaleObject(DEP, "v1beta1"), StaleObject(NS, "v1")]
