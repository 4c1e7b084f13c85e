from __future__ import annotations

from typing import Any

from kustomize_controller.apply.normalize import normalize_object, prepare_objects
from kustomize_controller.apply.selectors import owner_labels


def test_secret_string_data_folds_into_data() -> None:
    secret: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "data": {"a": "YQ=="},
        "stringData": {"b": "bee", "a": "override"},
    }
    normalize_object(secret)
    assert secret == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "data": {"a": "b3ZlcnJpZGU=", "b": "YmVl"},
    }


def test_empty_string_data_is_dropped() -> None:
    secret: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {}}
    normalize_object(secret)
    assert "stringData" not in secret and "data" not in secret


def test_port_protocols_default_to_tcp() -> None:
    deploy: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "creationTimestamp": None},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "c", "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}]}
                    ]
                }
            }
        },
        "status": {},
    }
    normalize_object(deploy)
    assert deploy["spec"]["template"]["spec"]["containers"][0]["ports"] == [
        {"containerPort": 80, "protocol": "TCP"},
        {"containerPort": 53, "protocol": "UDP"},
    ]
    assert "status" not in deploy and "creationTimestamp" not in deploy["metadata"]
    svc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s"},
        "spec": {"ports": [{"port": 80}]},
    }
    normalize_object(svc)
    # targetPort: 0 is the typed round trip's (an int-or-string value; the server defaults it to the port)
    assert svc["spec"]["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 0}]


def test_crd_status_kept_roles_untouched() -> None:
    crd: dict[str, Any] = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "x"},
        "status": {"conditions": []},
    }
    normalize_object(crd)
    assert "status" in crd
    role: dict[str, Any] = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "r", "creationTimestamp": None},
        "status": {},
    }
    normalize_object(role)
    assert role["status"] == {} and "creationTimestamp" in role["metadata"]


def test_prepare_stamps_owner_then_common_metadata_wins() -> None:
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"x": "1"}}}
    ]
    prepare_objects(
        objs,
        owner=owner_labels("apps", "flux-system"),
        common_labels={"x": "2", "kustomize.toolkit.fluxcd.io/name": "override"},
        common_annotations={"team": "a"},
    )
    assert objs[0]["metadata"] == {
        "name": "c",
        "labels": {
            "x": "2",
            "kustomize.toolkit.fluxcd.io/name": "override",
            "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
        },
        "annotations": {"team": "a"},
    }
