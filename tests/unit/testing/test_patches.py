from __future__ import annotations

import pytest

from kustomize_controller.testing.apiserver.errors import ApiStatusError
from kustomize_controller.testing.apiserver.kinds import BUILTIN_TYPES, ResourceType
from kustomize_controller.testing.apiserver.patch.jsonpatch6902 import json_patch
from kustomize_controller.testing.apiserver.patch.merge import merge_patch
from kustomize_controller.testing.apiserver.patch.strategic import strategic_merge_patch

DEPLOYMENT = next(t for t in BUILTIN_TYPES if t.kind == "Deployment")
SERVICE = next(t for t in BUILTIN_TYPES if t.kind == "Service")


@pytest.mark.parametrize(("target", "patch", "expected"), [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
])
def test_merge_patch_rfc7386_examples(target, patch, expected):
    before = repr(target)
    assert merge_patch(target, patch) == expected
    assert repr(target) == before


def test_json_patch_errors():
    assert json_patch({"a": 1}, [{"op": "replace", "path": "/a", "value": 2}]) == {"a": 2}
    with pytest.raises(ApiStatusError) as info:
        json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": 2}])
    assert info.value.code == 422
    with pytest.raises(ApiStatusError) as info:
        json_patch({"a": 1}, {"op": "add"})
    assert info.value.code == 400


def _pod_template(*containers):
    return {"spec": {"template": {"spec": {"containers": list(containers)}}}}


def test_strategic_merges_containers_env_and_ports_by_key():
    target = _pod_template({"name": "a", "image": "x:1", "env": [{"name": "E1", "value": "1"}],
                            "ports": [{"containerPort": 80, "name": "http"}]})
    patch = _pod_template({"name": "a", "env": [{"name": "E2", "value": "2"}, {"name": "E1", "value": "9"}],
                           "ports": [{"containerPort": 443}]}, {"name": "b", "image": "y"})
    result = strategic_merge_patch(DEPLOYMENT, target, patch)
    containers = result["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["a", "b"]
    assert containers[0]["image"] == "x:1"
    # the real server's order: what the patch names, in patch order, ahead of live-only items
    assert containers[0]["env"] == [{"name": "E2", "value": "2"}, {"name": "E1", "value": "9"}]
    assert [p["containerPort"] for p in containers[0]["ports"]] == [443, 80]


def test_strategic_directives():
    target = {"metadata": {"finalizers": ["a", "b"]},
              **_pod_template({"name": "a", "image": "x", "args": ["1", "2"]}, {"name": "b", "image": "y"})}
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "finalizers": ["c"]},
             **_pod_template({"name": "b", "$patch": "delete"}, {"name": "a", "args": ["3"]})}
    result = strategic_merge_patch(DEPLOYMENT, target, patch)
    assert result["metadata"]["finalizers"] == ["c", "b"]
    containers = result["spec"]["template"]["spec"]["containers"]
    assert containers == [{"name": "a", "image": "x", "args": ["3"]}]  # args has no merge key: replaced
    replaced = strategic_merge_patch(DEPLOYMENT, {"spec": {"selector": {"a": "1", "b": "2"}}},
                                     {"spec": {"selector": {"$patch": "replace", "c": "3"}}})
    assert replaced["spec"]["selector"] == {"c": "3"}
    retained = strategic_merge_patch(DEPLOYMENT, {"spec": {"strategy": {"type": "R", "rollingUpdate": {}}}},
                                     {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}})
    assert retained["spec"]["strategy"] == {"type": "Recreate"}


def test_strategic_service_ports_merge_by_port():
    result = strategic_merge_patch(SERVICE, {"spec": {"ports": [{"port": 80, "name": "http"}]}},
                                   {"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}})
    assert result["spec"]["ports"] == [{"port": 80, "name": "http", "targetPort": 8080}, {"port": 443}]


def test_strategic_missing_merge_key_is_bad_request():
    with pytest.raises(ApiStatusError) as info:
        strategic_merge_patch(DEPLOYMENT, _pod_template({"name": "a"}), _pod_template({"image": "x"}))
    assert info.value.code == 400


def test_custom_types_default_to_atomic_lists():
    custom = ResourceType(group="g", version="v1", kind="K", plural="ks", namespaced=True, custom=True,
                          schema={"type": "object", "properties": {"spec": {"type": "object", "properties": {
                              "items": {"type": "array", "x-kubernetes-list-type": "map",
                                        "x-kubernetes-list-map-keys": ["id"],
                                        "items": {"type": "object"}}}}}})
    from kustomize_controller.testing.apiserver.schema import list_type

    assert list_type(custom, ("spec", "items")).kind == "map"
    assert list_type(custom, ("spec", "items")).keys == ("id",)
    assert list_type(custom, ("spec", "other")).kind == "atomic"
    assert list_type(custom, ("metadata", "finalizers")).kind == "set"


@pytest.mark.parametrize(("live", "patch", "expected"), [
    (["A"], ["B"], ["B", "A"]),  # a new item goes before the live-only one it meets
    (["A", "B"], ["B", "C"], ["A", "B", "C"]),  # A is before B in the live list: it stays first
    (["A", "B", "C"], ["C", "A"], ["B", "C", "A"]),  # patch order among named items; B (live 1) < C (live 2)
    (["A", "B"], ["C"], ["C", "A", "B"]),
])
def test_strategic_merge_order_is_apimachinery_s(live, patch, expected):
    def env(names):
        return [{"name": n, "value": "1"} for n in names]

    target = _pod_template({"name": "c", "image": "x", "env": env(live)})
    result = strategic_merge_patch(DEPLOYMENT, target, _pod_template({"name": "c", "env": env(patch)}))
    assert [e["name"] for e in result["spec"]["template"]["spec"]["containers"][0]["env"]] == expected
