"""Staged apply against the API: stage order, REST mapper refresh, validation-before-write, no-op writes."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from kustomize_controller.apply.changeset import Action
from kustomize_controller.apply.errors import DryRunError
from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
from kustomize_controller.apply.normalize import prepare_objects
from kustomize_controller.apply.selectors import owner_labels
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import NotFoundError
from tests.integration.apply.conftest import configmap, mark, writes

pytestmark = pytest.mark.integration


def crd(group: str, kind: str, plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


def deployment(name: str, namespace: str, *, app: str = "web", image: str = "nginx:1") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {"containers": [{"name": "c", "image": image, "ports": [{"containerPort": 80}]}]},
            },
        },
    }


async def test_crd_and_custom_resource_in_one_apply(cluster: Any, kube: KubeClient, manager: ResourceManager) -> None:
    ns = cluster.namespace
    group = f"{ns}.example.com"  # cluster-scoped names of its own: a real cluster keeps what earlier runs made
    objects = [
        {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": ns}, "spec": {}},
        crd(group, "Widget", "widgets"),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"{ns}-extra"}},
        configmap("in-new-ns", f"{ns}-extra"),
    ]
    try:
        cs = await manager.apply_all_staged(objects, ApplyOptions())
        assert str(cs) == "\n".join(
            [
                f"CustomResourceDefinition/widgets.{group} created",
                f"Namespace/{ns}-extra created",
                f"ConfigMap/{ns}-extra/in-new-ns created",
                f"Widget/{ns}/w created",
            ]
        )
        assert (await kube.get(f"{group}/v1", "Widget", "w", ns))["metadata"]["name"] == "w"
    finally:
        for api_version, kind, name in (("apiextensions.k8s.io/v1", "CustomResourceDefinition", f"widgets.{group}"),
                                        ("v1", "Namespace", f"{ns}-extra")):
            with contextlib.suppress(NotFoundError):
                await kube.delete(api_version, kind, name)


async def test_custom_resources_wait_until_discovery_serves_their_new_kind(cluster: Any, manager: ResourceManager
                                                                           ) -> None:
    # a real kube-apiserver publishes a new CRD's group-version a moment after Established: here its
    # discovery answers 404 three more times
    server = cluster.require_server()
    ns = cluster.namespace
    group = f"{ns}.lag.example.com"
    server.faults.fail(status=404, method="GET", path=f"^/apis/{group}/v1$", count=3)
    objects = [crd(group, "Widget", "widgets"),
               {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": ns}}]
    cs = await manager.apply_all_staged(objects, ApplyOptions(wait_interval=0.1))
    assert [e.action for e in cs] == [Action.CREATED, Action.CREATED]


async def test_failed_dry_run_in_a_stage_writes_nothing_in_that_stage(cluster: Any, manager: ResourceManager) -> None:
    ns = cluster.namespace
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"{ns}-stage1"}},
        configmap("good-1", ns),
        configmap("Bad_Name", ns),  # invalid name: the dry-run rejects it
        configmap("good-2", ns),
    ]
    before = mark(cluster)
    with pytest.raises(DryRunError) as info:
        await manager.apply_all_staged(objects, ApplyOptions())
    assert str(info.value).startswith(f"ConfigMap/{ns}/Bad_Name dry-run failed (Invalid): ")
    written = writes(cluster, since=before)
    # the definitions stage passed and was written; nothing of the failing stage was
    assert [(w.resource, w.name) for w in written] == [("namespaces", f"{ns}-stage1")]
    assert str(info.value.change_set) == f"Namespace/{ns}-stage1 created"


async def test_second_apply_of_unchanged_objects_writes_nothing(cluster: Any, manager: ResourceManager) -> None:
    ns = cluster.namespace
    objects = [
        configmap("cfg", ns),
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "sec", "namespace": ns},
            "stringData": {"password": "hunter2"},
        },
        deployment("web", ns),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": ns},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 80}]},
        },
    ]
    prepare_objects(objects, owner=owner_labels("apps", "flux-system"))
    first = await manager.apply_all_staged(objects, ApplyOptions())
    assert {e.action for e in first} == {Action.CREATED}
    before = mark(cluster)
    for _ in range(2):
        again = await manager.apply_all_staged(objects, ApplyOptions())
        assert {e.action for e in again} == {Action.UNCHANGED}, str(again)
    assert writes(cluster, since=before) == []


async def test_changed_object_is_configured_and_only_it_is_written(cluster: Any, manager: ResourceManager) -> None:
    ns = cluster.namespace
    await manager.apply_all_staged([configmap("a", ns), configmap("b", ns)], ApplyOptions())
    before = mark(cluster)
    cs = await manager.apply_all_staged(
        [configmap("a", ns), configmap("b", ns, data={"key": "changed"})], ApplyOptions()
    )
    assert cs.to_map() == {f"ConfigMap/{ns}/a": "unchanged", f"ConfigMap/{ns}/b": "configured"}
    assert [(w.verb, w.name) for w in writes(cluster, since=before)] == [("patch", "b")]


async def test_namespace_not_found_message(cluster: Any, manager: ResourceManager) -> None:
    with pytest.raises(DryRunError) as info:
        await manager.apply_all_staged([configmap("a", f"{cluster.namespace}-missing")], ApplyOptions())
    assert str(info.value).startswith(f"ConfigMap/{cluster.namespace}-missing/a not found: ")
