from __future__ import annotations

from kustomize_controller.testing.apiserver.reads import decode_continue, encode_continue
from kustomize_controller.testing.apiserver.storage import Storage

KEY = ("", "configmaps")


def obj(ns, name):
    return {"metadata": {"namespace": ns, "name": name}}


def test_resource_version_is_global_and_monotonic():
    storage = Storage(history_size=10)
    a = storage.put(KEY, obj("a", "x"))
    b = storage.put(("", "secrets"), obj("a", "y"))
    c = storage.remove(KEY, a)
    versions = [int(o["metadata"]["resourceVersion"]) for o in (a, b, c)]
    assert versions == sorted(versions) and len(set(versions)) == 3


def test_iteration_order_and_namespace_scoping():
    storage = Storage()
    for ns, name in [("b", "2"), ("a", "9"), ("b", "1"), ("c", "0"), ("a", "1")]:
        storage.put(KEY, obj(ns, name))
    keys = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in storage.iterate(KEY, None)]
    assert keys == sorted(keys)
    assert [o["metadata"]["name"] for o in storage.iterate(KEY, "b")] == ["1", "2"]
    assert [o["metadata"]["name"] for o in storage.iterate(KEY, "b", after=("b", "1"))] == ["2"]
    assert storage.count(KEY, "a") == 2 and storage.count(KEY) == 5
    assert storage.remaining_after(KEY, None, ("a", "9")) == 3


def test_history_floor_moves_as_events_fall_out():
    storage = Storage(history_size=2)
    for i in range(4):
        storage.put(KEY, obj("a", str(i)))
    assert storage.watch(KEY, None, 2, lambda e: True) is None
    registered = storage.watch(KEY, None, storage.resource_version - 1, lambda e: True)
    assert registered is not None
    _, backlog = registered
    assert [e.obj["metadata"]["name"] for e in backlog] == ["3"]
    storage.compact()
    assert storage.watch(KEY, None, storage.resource_version - 1, lambda e: True) is None


def test_slow_watcher_is_closed():
    storage = Storage(watcher_buffer=2)
    registered = storage.watch(KEY, None, None, lambda e: True)
    assert registered is not None
    watcher, _ = registered
    for i in range(3):
        storage.put(KEY, obj("a", str(i)))
    assert watcher.closed


def test_continue_token_round_trip():
    assert decode_continue(encode_continue(42, ("ns", "name"))) == (42, ("ns", "name"))


def test_snapshot_pages_see_the_state_at_the_token_version():
    from kustomize_controller.testing.apiserver.cluster import Cluster
    from kustomize_controller.testing.apiserver.reads import list_objects
    from kustomize_controller.testing.apiserver.selectors import parse_field_selector, parse_label_selector

    cluster = Cluster()
    rt = cluster.registry.lookup("", "v1", "configmaps")
    ns_type = cluster.registry.lookup("", "v1", "namespaces")
    assert rt is not None and ns_type is not None
    for ns in ("a", "b"):
        cluster.create(ns_type, "", {"metadata": {"name": ns}}, dry_run=False, manager="t")
        for name in ("1", "2"):
            cluster.create(rt, ns, {"metadata": {"name": name}, "data": {"v": "old"}}, dry_run=False, manager="t")
    labels, fields = parse_label_selector(""), parse_field_selector("", "ConfigMap")
    first = list_objects(cluster, rt, None, labels=labels, fields=fields, limit=1, continue_token=None)
    cluster.delete(rt, "b", "1", None, dry_run=False)
    cluster.patch(rt, "a", "2", {"data": {"v": "new"}}, patch_type="merge", subresource="", dry_run=False,
                  manager="t", force=False)
    cluster.create(rt, "a", {"metadata": {"name": "3"}}, dry_run=False, manager="t")
    rest = list_objects(cluster, rt, None, labels=labels, fields=fields, limit=None,
                        continue_token=first["metadata"]["continue"])
    seen = [(o["metadata"]["namespace"], o["metadata"]["name"], o["data"]["v"]) for o in rest["items"]]
    assert seen == [("a", "2", "old"), ("b", "1", "old"), ("b", "2", "old")]
