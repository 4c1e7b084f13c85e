"""Properties of server-side apply and field sets over generated ConfigMap-shaped objects."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kustomize_controller.testing.apiserver.kinds import BUILTIN_TYPES
from kustomize_controller.testing.apiserver.patch.apply import server_side_apply
from kustomize_controller.testing.apiserver.patch.fieldsets import decode, encode, fields_of
from kustomize_controller.testing.apiserver.patch.merge import merge_patch

CONFIGMAP = next(t for t in BUILTIN_TYPES if t.kind == "ConfigMap")
DEPLOYMENT = next(t for t in BUILTIN_TYPES if t.kind == "Deployment")
NOW = "2026-01-01T00:00:00Z"

keys = st.sampled_from(["a", "b", "c", "d", "e"])
values = st.sampled_from(["1", "2", "3"])
datas = st.dictionaries(keys, values, max_size=5)


def cm(data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}, "data": data}


@settings(max_examples=150, deadline=None)
@given(st.lists(datas, min_size=1, max_size=5))
def test_single_applier_converges_to_its_last_configuration(sequence):
    live = None
    for data in sequence:
        live = server_side_apply(CONFIGMAP, live, cm(data), manager="m", force=False, subresource="", now=NOW)
    assert live is not None
    assert (live.get("data") or {}) == sequence[-1]


@settings(max_examples=150, deadline=None)
@given(datas, datas, datas)
def test_disjoint_appliers_keep_each_others_fields(first, second, first_again):
    second = {k.upper(): v for k, v in second.items()}
    live = server_side_apply(CONFIGMAP, None, cm(first), manager="one", force=False, subresource="", now=NOW)
    live = server_side_apply(CONFIGMAP, live, cm(second), manager="two", force=False, subresource="", now=NOW)
    live = server_side_apply(CONFIGMAP, live, cm(first_again), manager="one", force=False, subresource="",
                             now=NOW)
    assert live["data"] == {**first_again, **second}


@settings(max_examples=150, deadline=None)
@given(datas, datas)
def test_forced_apply_always_wins_and_owns_what_it_sent(first, second):
    live = server_side_apply(CONFIGMAP, None, cm(first), manager="one", force=False, subresource="", now=NOW)
    live = server_side_apply(CONFIGMAP, live, cm(second), manager="two", force=True, subresource="", now=NOW)
    for key, value in second.items():
        assert live["data"][key] == value
    owners = {e["manager"]: decode(e["fieldsV1"]) for e in live["metadata"].get("managedFields", [])}
    sent = {("f:data", "f:" + k) for k in second} if second else {("f:data",)}
    assert owners.get("two", set()) == sent
    for path in owners.get("one", set()) & owners.get("two", set()):
        if len(path) == 2:  # still shared: only because both set the same value
            key = path[1][2:]
            assert first[key] == second[key]


containers = st.lists(st.builds(lambda n, i: {"name": n, "image": i}, st.sampled_from(["a", "b", "c"]),
                                values), max_size=3, unique_by=lambda c: c["name"])


@settings(max_examples=150, deadline=None)
@given(containers)
def test_fieldsets_round_trip_through_fieldsv1(items):
    obj = {"spec": {"template": {"spec": {"containers": items}}}, "metadata": {"labels": {"x": "1"}}}
    paths = fields_of(DEPLOYMENT, obj)
    assert decode(encode(paths)) == paths


@settings(max_examples=150, deadline=None)
@given(datas, datas)
def test_merge_patch_of_a_map_diff_reaches_the_target(source, target):
    patch = {k: v for k, v in target.items()}
    patch.update({k: None for k in source if k not in target})
    assert merge_patch(source, patch) == target
