"""Pod spec validation: requests against limits, in every kind that carries a pod spec."""

from __future__ import annotations

from typing import Any

import pytest

from kustomize_controller.testing.apiserver.kinds import BUILTIN_TYPES, ResourceType
from kustomize_controller.testing.apiserver.podspec import POD_SPEC_PATHS, pod_spec_errors, resource_errors


def kind(group: str, name: str) -> ResourceType:
    return next(rt for rt in BUILTIN_TYPES if (rt.group, rt.kind) == (group, name))


def messages(resources: dict[str, Any]) -> list[str]:
    return [str(e) for e in resource_errors("c", resources)]


def test_requests_may_not_exceed_limits_and_are_printed_as_stored() -> None:
    assert messages({"limits": {"cpu": "1500m", "memory": "2Mi"}, "requests": {"cpu": "2", "memory": "1Gi"}}) == [
        'c.requests: Invalid value: "2": must be less than or equal to cpu limit of 1500m',
        'c.requests: Invalid value: "1Gi": must be less than or equal to memory limit of 2Mi']
    # equal, below, or without a limit: fine
    assert messages({"limits": {"cpu": "1"}, "requests": {"cpu": "1000m", "memory": "5Gi"}}) == []
    assert messages({"limits": {"cpu": "2"}, "requests": {"cpu": "1"}}) == []


def test_resources_that_may_not_be_overcommitted() -> None:
    assert messages({"limits": {"example.com/gpu": "2"}, "requests": {"example.com/gpu": "1"}}) == [
        'c.requests: Invalid value: "1": must be equal to example.com/gpu limit of 2']
    assert messages({"requests": {"hugepages-2Mi": "2Mi"}}) == [
        "c.limits: Required value: Limit must be set for non overcommitable resources"]
    # a kubernetes.io-prefixed name is native, so it may be overcommitted
    assert messages({"limits": {"kubernetes.io/x": "2"}, "requests": {"kubernetes.io/x": "1"}}) == []


def test_negative_quantities() -> None:
    assert messages({"limits": {"cpu": "-1"}, "requests": {"memory": "-1Mi"}}) == [
        'c.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0',
        'c.requests[memory]: Invalid value: "-1Mi": must be greater than or equal to 0']


@pytest.mark.parametrize(("group", "name"), sorted(POD_SPEC_PATHS))
def test_every_pod_spec_kind_is_checked_at_its_path(group: str, name: str) -> None:
    over = {"limits": {"cpu": "1"}, "requests": {"cpu": "2"}}
    obj: dict[str, Any] = {}
    node = obj
    for key in POD_SPEC_PATHS[(group, name)]:
        node = node.setdefault(key, {})
    node["containers"] = [{"name": "a"}, {"name": "b", "resources": over}]
    node["initContainers"] = [{"name": "i", "resources": over}]
    where = ".".join(POD_SPEC_PATHS[(group, name)])
    assert [e.field for e in pod_spec_errors(kind(group, name), obj)] == [
        f"{where}.containers[1].resources.requests", f"{where}.initContainers[0].resources.requests"]


def test_kinds_without_a_pod_spec_and_odd_shapes_are_left_alone() -> None:
    assert pod_spec_errors(kind("", "ConfigMap"), {"spec": {"containers": []}}) == []
    assert pod_spec_errors(kind("", "Pod"), {"spec": {"containers": "x"}}) == []
    assert pod_spec_errors(kind("", "Pod"), {"spec": {"containers": [{"resources": {"limits": "x"}}]}}) == []
