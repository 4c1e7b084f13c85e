from __future__ import annotations

import pytest

from kustomize_controller.testing.apiserver.errors import ApiStatusError
from kustomize_controller.testing.apiserver.kinds import BUILTIN_TYPES
from kustomize_controller.testing.apiserver.patch.apply import server_side_apply
from kustomize_controller.testing.apiserver.patch.fieldsets import decode, encode, fields_of, path_string
from kustomize_controller.testing.apiserver.patch.managed import record_update

CONFIGMAP = next(t for t in BUILTIN_TYPES if t.kind == "ConfigMap")
DEPLOYMENT = next(t for t in BUILTIN_TYPES if t.kind == "Deployment")
NOW = "2026-01-01T00:00:00Z"


def cm(data, **meta):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n", **meta},
            "data": data}


def test_fields_of_leaves_keyed_items_and_sets():
    obj = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "d", "uid": "u", "labels": {"a": "1"}, "finalizers": ["f"]},
           "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i",
                                                                        "args": ["x"]}]}}}}
    fields = fields_of(DEPLOYMENT, obj)
    item = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"c"}')
    assert fields == {
        ("f:metadata", "f:labels", "f:a"),
        ("f:metadata", "f:finalizers", 'v:"f"'),
        ("f:spec", "f:replicas"),
        item, (*item, "f:name"), (*item, "f:image"), (*item, "f:args"),
    }
    assert fields_of(DEPLOYMENT, {"status": {"x": 1}, "spec": {"a": 1}}, status=False) == {("f:spec", "f:a")}


def test_encode_decode_round_trip_and_dot_marker():
    paths = {("f:data", "f:a"), ("f:spec", "f:c", 'k:{"name":"x"}'), ("f:spec", "f:c", 'k:{"name":"x"}', "f:name")}
    encoded = encode(paths)
    assert encoded == {"f:data": {"f:a": {}},
                       "f:spec": {"f:c": {'k:{"name":"x"}': {".": {}, "f:name": {}}}}}
    assert decode(encoded) == paths


@pytest.mark.parametrize(("path", "text"), [
    (("f:data", "f:k"), ".data.k"),
    (("f:spec", "f:containers", 'k:{"name":"app"}', "f:image"), '.spec.containers[name="app"].image'),
    (("f:ports", 'k:{"containerPort":80,"protocol":"TCP"}'), '.ports[containerPort=80,protocol="TCP"]'),
    (("f:metadata", "f:finalizers", 'v:"x"'), '.metadata.finalizers[="x"]'),
])
def test_path_strings_match_the_real_server(path, text):
    assert path_string(path) == text


def test_update_takes_changed_fields_from_other_managers():
    old = cm({"a": "1", "b": "1"})
    record_update(CONFIGMAP, None, old, manager="creator", subresource="", now=NOW)
    new = cm({"a": "2", "b": "1", "c": "1"}, managedFields=old["metadata"]["managedFields"])
    record_update(CONFIGMAP, old, new, manager="editor", subresource="", now=NOW)
    entries = {e["manager"]: e["fieldsV1"] for e in new["metadata"]["managedFields"]}
    # the creator made the data map itself ("."), the editor only changed and added keys in it
    assert entries == {"creator": {"f:data": {".": {}, "f:b": {}}}, "editor": {"f:data": {"f:a": {}, "f:c": {}}}}


def test_apply_conflict_force_and_removal():
    live = cm({"a": "1"})
    record_update(CONFIGMAP, None, live, manager="kubectl", subresource="", now=NOW)
    with pytest.raises(ApiStatusError) as info:
        server_side_apply(CONFIGMAP, live, cm({"a": "2", "b": "2"}), manager="flux", force=False, subresource="",
                          now=NOW)
    assert info.value.code == 409
    assert info.value.message == 'Apply failed with 1 conflict: conflict with "kubectl" using v1: .data.a'
    forced = server_side_apply(CONFIGMAP, live, cm({"a": "2", "b": "2"}), manager="flux", force=True,
                               subresource="", now=NOW)
    assert forced["data"] == {"a": "2", "b": "2"}
    # forcing takes the conflicting field; the map kubectl created stays its own (structured-merge-diff
    # only moves conflicting leaves)
    entries = {e["manager"]: e["fieldsV1"] for e in forced["metadata"]["managedFields"]}
    assert entries == {"flux": {"f:data": {"f:a": {}, "f:b": {}}}, "kubectl": {"f:data": {}}}
    shrunk = server_side_apply(CONFIGMAP, forced, cm({"b": "2"}), manager="flux", force=False, subresource="",
                               now=NOW)
    assert shrunk["data"] == {"b": "2"}


def test_apply_multiple_conflicts_message():
    live = cm({"a": "1", "b": "1"})
    record_update(CONFIGMAP, None, live, manager="x", subresource="", now=NOW)
    with pytest.raises(ApiStatusError) as info:
        server_side_apply(CONFIGMAP, live, cm({"a": "2", "b": "2"}), manager="y", force=False, subresource="",
                          now=NOW)
    assert info.value.message == ('Apply failed with 2 conflicts: conflicts with "x" using v1:\n- .data.a\n'
                                  '- .data.b')
    assert [c["field"] for c in info.value.details["causes"]] == [".data.a", ".data.b"]


@pytest.mark.parametrize(("live", "applied", "expected"), [
    (["a", "b"], ["c", "a"], ["c", "a", "b"]),
    (["a", "b", "c"], ["c", "a"], ["b", "c", "a"]),
    (["a", "x", "b"], ["a", "b"], ["a", "x", "b"]),
    (["a", "b", "c"], ["b", "d"], ["a", "b", "c", "d"]),
    ([], ["a", "b"], ["a", "b"]),
    (["a", "b"], [], ["a", "b"]),
])
def test_associative_lists_merge_in_structured_merge_diff_order(live, applied, expected):
    from kustomize_controller.testing.apiserver.patch.apply import interleave

    assert interleave(live, applied, lambda x: x, lambda _have, item: item) == expected


def test_containers_added_in_front_stay_in_front():
    live = {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "a"}]}}}}
    applied = {"spec": {"template": {"spec": {"containers": [{"name": "init", "image": "i"},
                                                             {"name": "app", "image": "b"}]}}}}
    from kustomize_controller.testing.apiserver.patch.apply import structured_merge

    merged = structured_merge(DEPLOYMENT, live, applied)
    assert merged["spec"]["template"]["spec"]["containers"] == [{"name": "init", "image": "i"},
                                                                {"name": "app", "image": "b"}]
