from __future__ import annotations

from typing import Any

import pytest

from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.apply.staging import (
    kind_rank,
    parse_group_kind_set,
    partition,
    sort_objects,
    sort_refs,
    staged_order,
)


def obj(api_version: str, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


def names(objects: list[dict[str, Any]]) -> list[str]:
    return [f"{o['kind']}/{o['metadata']['name']}" for o in objects]


def test_partition_into_upstream_stages() -> None:
    objects = [
        obj("apps/v1", "Deployment", "web", "app"),
        obj("example.com/v1", "Widget", "w", "app"),
        obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "widgets.example.com"),
        obj("v1", "Namespace", "app"),
        obj("rbac.authorization.k8s.io/v1", "ClusterRole", "reader"),
        obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "reader"),
        obj("storage.k8s.io/v1", "StorageClass", "fast"),
        obj("cluster.x-k8s.io/v1beta1", "ClusterClass", "quick", "app"),
        obj("cluster.x-k8s.io/v1beta1", "Cluster", "c1", "app"),
        obj("example.com/v1", "namespace", "not-core"),  # not v1: not a definition
    ]
    stages = partition(objects, frozenset({("cluster.x-k8s.io", "Cluster")}))
    assert names(stages.definitions) == [
        "CustomResourceDefinition/widgets.example.com",
        "Namespace/app",
        "ClusterRole/reader",
    ]
    assert names(stages.classes) == ["StorageClass/fast", "ClusterClass/quick"]
    assert names(stages.custom) == ["Cluster/c1"]
    assert names(stages.rest) == [
        "Deployment/web",
        "Widget/w",
        "ClusterRoleBinding/reader",
        "namespace/not-core",
    ]


def test_definition_kind_match_is_case_insensitive_class_suffix_is_not() -> None:
    stages = partition(
        [obj("apiextensions.k8s.io/v1beta1", "customresourcedefinition", "x"), obj("v1", "Fooclass", "y")]
    )
    assert names(stages.definitions) == ["customresourcedefinition/x"]
    assert names(stages.rest) == ["Fooclass/y"]


def test_sort_by_kind_order_then_namespace_and_name() -> None:
    objects = [
        obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "v"),
        obj("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "m"),
        obj("example.com/v1", "Widget", "w", "a"),
        obj("apps/v1", "Deployment", "b", "a"),
        obj("apps/v1", "Deployment", "a", "b"),
        obj("apps/v1", "Deployment", "z", "a"),
        obj("v1", "Service", "s", "a"),
        obj("v1", "ConfigMap", "c", "a"),
        obj("v1", "Secret", "s", "a"),
        obj("v1", "ServiceAccount", "sa", "a"),
        obj("rbac.authorization.k8s.io/v1", "RoleBinding", "rb", "a"),
        obj("rbac.authorization.k8s.io/v1", "Role", "r", "a"),
        obj("v1", "Namespace", "a"),
        obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "crd"),
        obj("aaa.io/v1", "Alpha", "x", "a"),
    ]
    assert names(sort_objects(objects)) == [
        "CustomResourceDefinition/crd",
        "Namespace/a",
        "ServiceAccount/sa",
        "Role/r",
        "RoleBinding/rb",
        "ConfigMap/c",
        "Secret/s",
        "Service/s",
        "Deployment/b",
        "Deployment/z",
        "Deployment/a",
        "Alpha/x",
        "Widget/w",
        "MutatingWebhookConfiguration/m",
        "ValidatingWebhookConfiguration/v",
    ]


def test_sort_is_independent_of_input_order() -> None:
    objects = [obj("v1", "ConfigMap", n, "ns") for n in "dcab"]
    assert names(sort_objects(objects)) == names(sort_objects(list(reversed(objects))))


def test_reverse_order_for_prune() -> None:
    refs = [
        ObjRef("", "Namespace", "", "a"),
        ObjRef("apps", "Deployment", "a", "d"),
        ObjRef("apiextensions.k8s.io", "CustomResourceDefinition", "", "c"),
    ]
    assert [r.kind for r in sort_refs(refs, reverse=True)] == [
        "Deployment",
        "Namespace",
        "CustomResourceDefinition",
    ]


def test_kind_rank() -> None:
    assert kind_rank("CustomResourceDefinition") < kind_rank("Namespace") < kind_rank("ClusterRole")
    assert kind_rank("PodDisruptionBudget") < kind_rank("Unknown") == 0 < kind_rank("ValidatingWebhookConfiguration")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", frozenset()),
        ("cluster.x-k8s.io/Cluster", {("cluster.x-k8s.io", "Cluster")}),
        ("ConfigMap, apps/Deployment,", {("", "ConfigMap"), ("apps", "Deployment")}),
    ],
)
def test_parse_group_kind_set(text: str, expected: set[tuple[str, str]]) -> None:
    assert parse_group_kind_set(text) == frozenset(expected)


def test_parse_group_kind_set_rejects_empty_kind() -> None:
    with pytest.raises(ValueError, match="invalid group/kind format"):
        parse_group_kind_set("apps/")


def test_staged_order_is_stage_by_stage_then_sorted() -> None:
    objects = [
        obj("cluster.x-k8s.io/v1beta1", "Cluster", "c1", "app"),
        obj("v1", "ConfigMap", "b", "app"),
        obj("storage.k8s.io/v1", "StorageClass", "fast"),
        obj("v1", "Namespace", "app"),
        obj("v1", "ConfigMap", "a", "app"),
    ]
    order = staged_order(objects, frozenset({("cluster.x-k8s.io", "Cluster")}))
    assert [f"{r.kind}/{r.name}" for r in order] == [
        "Namespace/app", "StorageClass/fast", "Cluster/c1", "ConfigMap/a", "ConfigMap/b"]
    assert order[0] == ObjRef(group="", kind="Namespace", namespace="", name="app")
