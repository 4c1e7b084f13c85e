"""Inventory ids: the cli-utils ``<namespace>_<name>_<group>_<kind>`` format, RBAC ``:`` escaping."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kustomize_controller.api.inventory import (
    InventoryIdError,
    ObjectId,
    ResourceInventory,
    ResourceRef,
    format_inventory_id,
    parse_inventory_id,
)

RBAC = "rbac.authorization.k8s.io"

TABLE = [
    (ObjectId("default", "podinfo", "", "Service"), "default_podinfo__Service"),
    (ObjectId("", "my-ns", "", "Namespace"), "_my-ns__Namespace"),
    (ObjectId("apps", "web", "apps", "Deployment"), "apps_web_apps_Deployment"),
    (
        ObjectId(
            "",
            "kustomizations.kustomize.toolkit.fluxcd.io",
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
        ),
        "_kustomizations.kustomize.toolkit.fluxcd.io_apiextensions.k8s.io_CustomResourceDefinition",
    ),
    (
        ObjectId("", "system:metrics-server", RBAC, "ClusterRole"),
        f"_system__metrics-server_{RBAC}_ClusterRole",
    ),
    (
        ObjectId("", "system:auth-delegator:x", RBAC, "ClusterRoleBinding"),
        f"_system__auth-delegator__x_{RBAC}_ClusterRoleBinding",
    ),
    (
        ObjectId("kube-system", "system:controller:a", RBAC, "Role"),
        f"kube-system_system__controller__a_{RBAC}_Role",
    ),
    (ObjectId("kube-system", "ns:b", RBAC, "RoleBinding"), f"kube-system_ns__b_{RBAC}_RoleBinding"),
    (ObjectId("", "plain", RBAC, "ClusterRole"), f"_plain_{RBAC}_ClusterRole"),
    (ObjectId("default", "cfg", "", "ConfigMap"), "default_cfg__ConfigMap"),
    (
        ObjectId("flux-system", "podinfo", "source.toolkit.fluxcd.io", "GitRepository"),
        "flux-system_podinfo_source.toolkit.fluxcd.io_GitRepository",
    ),
    # ':' is only escaped for the four RBAC kinds of the RBAC group.
    (ObjectId("default", "a:b", "example.com", "Role"), "default_a:b_example.com_Role"),
]


@pytest.mark.parametrize(("obj_id", "text"), TABLE)
def test_format_and_parse(obj_id: ObjectId, text: str) -> None:
    assert format_inventory_id(obj_id) == text
    assert str(obj_id) == text
    assert parse_inventory_id(text) == obj_id


@pytest.mark.parametrize(
    "text",
    [
        "",
        "nounderscore",
        "ns_name",
        "ns_name_Kind",
        "default_a_b__Service",  # '_' left in a name that is not RBAC
        "default_a__b_apps_Deployment",  # "__" is only an escaped ":" for RBAC kinds
        "default___Service",  # empty name
        "default_name_apps_",  # empty kind
    ],
)
def test_parse_rejects_malformed_ids(text: str) -> None:
    with pytest.raises(InventoryIdError, match="invalid inventory id"):
        parse_inventory_id(text)


_dns = st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,20}[a-z0-9])?", fullmatch=True)
_group = st.one_of(st.just(""), st.just(RBAC), st.from_regex(r"[a-z]{1,8}(\.[a-z]{1,8}){0,2}", fullmatch=True))
_kind = st.sampled_from(["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "Service", "Deployment"])


@st.composite
def _object_ids(draw: st.DrawFn) -> ObjectId:
    group = draw(_group)
    kind = draw(_kind)
    name = draw(_dns)
    if group == RBAC and kind in {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}:
        name = ":".join(draw(st.lists(_dns, min_size=1, max_size=3)))
    return ObjectId(draw(st.one_of(st.just(""), _dns)), name, group, kind)


@given(_object_ids())
def test_round_trip(obj_id: ObjectId) -> None:
    assert parse_inventory_id(format_inventory_id(obj_id)) == obj_id


def test_object_id_is_frozen_and_hashable() -> None:
    a = ObjectId("ns", "n", "", "Service")
    assert {a, ObjectId("ns", "n", "", "Service")} == {a}
    with pytest.raises(AttributeError):
        a.name = "other"  # type: ignore[misc]


def test_resource_ref_helpers() -> None:
    ref = ResourceRef.of(ObjectId("", "system:x", RBAC, "ClusterRole"), "v1")
    assert ref.model_dump() == {"id": f"_system__x_{RBAC}_ClusterRole", "v": "v1"}
    assert ref.object_id().name == "system:x"
    assert ref.api_version() == f"{RBAC}/v1"
    assert ResourceRef(id="default_cm__ConfigMap", v="v1").api_version() == "v1"


def test_inventory_round_trip_and_required_entries() -> None:
    doc = {"entries": [{"id": "default_podinfo__Service", "v": "v1"}, {"id": "_my-ns__Namespace", "v": "v1"}]}
    assert ResourceInventory.model_validate(doc).model_dump(by_alias=True, exclude_none=True) == doc
    assert ResourceInventory.model_validate({"entries": []}).model_dump() == {"entries": []}
    with pytest.raises(ValueError, match="entries"):
        ResourceInventory.model_validate({})
