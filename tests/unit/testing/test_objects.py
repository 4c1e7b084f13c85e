from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kustomize_controller.testing.apiserver.kinds import BUILTIN_TYPES, ResourceType
from kustomize_controller.testing.apiserver.objects import prepare_create, prepare_update, semantically_equal
from kustomize_controller.testing.apiserver.workloads import needs_update

NOW = datetime(2026, 1, 1, tzinfo=UTC)
DEPLOYMENT = next(t for t in BUILTIN_TYPES if t.kind == "Deployment")
CONFIGMAP = next(t for t in BUILTIN_TYPES if t.kind == "ConfigMap")
CR_STATUS = ResourceType(group="g", version="v1", kind="K", plural="ks", namespaced=True, custom=True,
                         generation=True, has_status=True)
CR_PLAIN = ResourceType(group="g", version="v1", kind="K", plural="ks", namespaced=True, custom=True,
                        generation=True, has_status=False)


def base(rt: ResourceType) -> dict:
    return prepare_create(rt, {"metadata": {"name": "x", "namespace": "n", "labels": {"a": "1"}},
                               "spec": {"r": 1}, "status": {"s": 1}}, now=NOW)


@pytest.mark.parametrize(("rt", "change", "generation"), [
    (DEPLOYMENT, {"spec": {"r": 2}}, 2),
    (DEPLOYMENT, {"metadata": {"labels": {"a": "2"}}}, 1),
    (DEPLOYMENT, {"metadata": {"annotations": {"b": "1"}}}, 2),
    (DEPLOYMENT, {"status": {"s": 2}}, 1),
    (CR_STATUS, {"spec": {"r": 2}}, 2),
    (CR_STATUS, {"metadata": {"annotations": {"b": "1"}}}, 1),
    (CR_STATUS, {"status": {"s": 2}}, 1),
    (CR_PLAIN, {"status": {"s": 2}}, 2),
    (CR_PLAIN, {"metadata": {"labels": {"a": "2"}}}, 1),
])
def test_generation_rules(rt, change, generation):
    old = base(rt)
    new = {**old, **{k: v for k, v in change.items() if k != "metadata"}}
    new["metadata"] = {**old["metadata"], **change.get("metadata", {})}
    assert prepare_update(rt, old, new, subresource=None)["metadata"]["generation"] == generation


def test_create_sets_identity_and_drops_status_of_subresource_kinds():
    created = base(DEPLOYMENT)
    assert created["metadata"]["generation"] == 1
    assert created["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"
    assert created["status"] == {}
    assert "status" not in base(CR_STATUS)
    assert base(CR_PLAIN)["status"] == {"s": 1}
    assert "generation" not in prepare_create(CONFIGMAP, {"metadata": {"name": "c", "generation": 5}}, now=NOW)[
        "metadata"]
    named = prepare_create(CONFIGMAP, {"metadata": {"generateName": "pre-"}}, now=NOW)
    assert named["metadata"]["name"].startswith("pre-") and len(named["metadata"]["name"]) == 9


def test_status_update_takes_only_status():
    old = base(CR_STATUS)
    old["status"] = {"s": 1}
    new = {**old, "spec": {"r": 9}, "status": {"s": 2}, "metadata": {**old["metadata"], "labels": {}}}
    result = prepare_update(CR_STATUS, old, new, subresource="status")
    assert result["spec"] == {"r": 1} and result["status"] == {"s": 2}
    assert result["metadata"]["labels"] == {"a": "1"}


def test_semantic_equality_ignores_resource_version_and_managed_field_times():
    a = {"metadata": {"resourceVersion": "1", "managedFields": [{"manager": "m", "time": "t1"}]}, "x": 1}
    b = {"metadata": {"resourceVersion": "2", "managedFields": [{"manager": "m", "time": "t2"}]}, "x": 1}
    assert semantically_equal(a, b)
    assert not semantically_equal(a, {**b, "x": 2})


def test_workload_simulation_only_when_not_ready_yet():
    deployment = base(DEPLOYMENT)
    deployment["spec"] = {"replicas": 3}
    status = needs_update(DEPLOYMENT, deployment, "t")
    assert status is not None and status["availableReplicas"] == 3 and status["observedGeneration"] == 1
    assert needs_update(DEPLOYMENT, {**deployment, "status": status}, "later") is None
    assert needs_update(CONFIGMAP, base(CONFIGMAP), "t") is None
    terminating = {**deployment, "metadata": {**deployment["metadata"], "deletionTimestamp": "t"}}
    assert needs_update(DEPLOYMENT, terminating, "t") is None


def test_workload_simulation_leaves_never_ready_objects_alone():
    from kustomize_controller.testing.apiserver.workloads import NEVER_READY_ANNOTATION

    deployment = base(DEPLOYMENT)
    deployment["spec"] = {"replicas": 1}
    broken = {**deployment, "metadata": {**deployment["metadata"], "annotations": {NEVER_READY_ANNOTATION: "true"}}}
    assert needs_update(DEPLOYMENT, broken, "t") is None
    other = {**deployment, "metadata": {**deployment["metadata"], "annotations": {NEVER_READY_ANNOTATION: "no"}}}
    assert needs_update(DEPLOYMENT, other, "t") is not None
