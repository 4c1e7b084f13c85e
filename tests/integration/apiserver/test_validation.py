"""Validation answers as kube-apiserver v1.36 gives them (plain HTTP: holds on a real cluster too)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from .helpers import MERGE, STRATEGIC, call, cm_path, configmap, delete_and_wait, release
from .test_crd import CRD_PATH, _established, widget_crd

pytestmark = pytest.mark.integration


def causes(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c.get("reason", ""), c.get("field", "")) for c in (body.get("details") or {}).get("causes") or []]


def lease(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15, **spec}}


@pytest.mark.parametrize("value", ["2026-01-01T00:00:00Z", "not a time", "2026-01-01T00:00:00.5Z"])
async def test_lease_times_are_micro_times(cluster, value: str) -> None:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{cluster.namespace}/leases"
    async with cluster.session() as http:
        status, body = await call(http, "POST", path, body=lease("bad", renewTime=value))
        assert (status, body.get("reason")) == (400, "BadRequest"), body
        status, body = await call(http, "POST", path, body=lease("also-bad", acquireTime=value))
        assert status == 400, body
        status, body = await call(http, "POST", path, body=lease("good", renewTime="2026-01-01T00:00:00.000000Z"))
        assert status == 201, body


@pytest.mark.parametrize("kind", ["ConfigMap", "Secret"])
async def test_immutable_configmap_and_secret_keep_their_data(cluster, kind: str) -> None:
    ns = cluster.namespace
    path = cm_path(ns) if kind == "ConfigMap" else f"/api/v1/namespaces/{ns}/secrets"
    body = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "frozen"}, "data": {"a": "YQ=="},
            "immutable": True}
    async with cluster.session() as http:
        status, created = await call(http, "POST", path, body=body)
        assert status == 201, created
        status, refused = await call(http, "PATCH", f"{path}/frozen", body={"data": {"a": "Yg=="}},
                                     content_type=MERGE)
        assert (status, refused["reason"]) == (422, "Invalid"), refused
        assert ("FieldValueForbidden", "data") in causes(refused)
        status, same = await call(http, "PATCH", f"{path}/frozen", body={"metadata": {"labels": {"x": "1"}}},
                                  content_type=MERGE)
        assert status == 200, same  # metadata may still change


async def test_service_cluster_ip_change_names_cluster_ips(cluster) -> None:
    path = f"/api/v1/namespaces/{cluster.namespace}/services"
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "fixed"},
           "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}}
    async with cluster.session() as http:
        status, created = await call(http, "POST", path, body=svc)
        assert status == 201, created
        status, refused = await call(http, "PATCH", f"{path}/fixed", body={"spec": {"clusterIP": "None"}},
                                     content_type=MERGE)
    assert (status, refused["reason"]) == (422, "Invalid"), refused
    assert [c[1] for c in causes(refused)] == ["spec.clusterIPs[0]"]
    assert "may not change once set" in refused["message"]


async def test_no_finalizer_may_be_added_to_a_terminating_object(cluster) -> None:
    ns = cluster.namespace
    async with cluster.session() as http:
        body = configmap("going")
        body["metadata"]["finalizers"] = ["example.com/hold"]
        try:
            await call(http, "POST", cm_path(ns), body=body)
            await call(http, "DELETE", cm_path(ns, "going"))
            status, refused = await call(http, "PATCH", cm_path(ns, "going"), content_type=MERGE,
                                         body={"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}})
            assert (status, refused["reason"]) == (422, "Invalid"), refused
            assert causes(refused) == [("FieldValueForbidden", "metadata.finalizers")] * 2
            assert 'found new finalizers []string{"example.com/new"}' in refused["message"]
        finally:
            await release(http, cm_path(ns, "going"))


async def test_unknown_field_selector_on_a_core_kind(cluster) -> None:
    async with cluster.session() as http:
        status, body = await call(http, "GET", cm_path(cluster.namespace), params={"fieldSelector": "spec.nothing=x"})
    assert (status, body["reason"]) == (400, "BadRequest")
    assert body["message"] == '"spec.nothing" is not a known field selector: only "metadata.name", "metadata.namespace"'


def _tagged_crd(group: str) -> dict[str, Any]:
    crd = widget_crd(group)
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
        "type": "object", "properties": {
            "size": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}}}
    return crd


async def test_custom_resource_schema_and_type_meta_errors(cluster) -> None:
    group = f"{cluster.namespace}.valid.example.com"
    ns = cluster.namespace
    async with cluster.session() as http:
        try:
            status, crd = await call(http, "POST", CRD_PATH, body=_tagged_crd(group))
            assert status == 201, crd
            await _established(http, f"widgets.{group}")
            base = f"/apis/{group}/v1/namespaces/{ns}/widgets"
            for _ in range(50):  # a real server serves the new kind a moment after Established
                status, _ = await call(http, "GET", base)
                if status == 200:
                    break
                await asyncio.sleep(0.1)

            def widget(name: str, **spec: Any) -> dict[str, Any]:
                return {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}

            status, body = await call(http, "POST", base, body=widget("typed", size="big"))
            assert (status, body["reason"]) == (422, "Invalid"), body
            assert causes(body) == [("FieldValueTypeInvalid", "spec.size")]

            status, body = await call(http, "POST", base, body=widget("dup", tags=["a", "a"]))
            assert (status, body["reason"]) == (422, "Invalid"), body
            assert causes(body) == [("FieldValueDuplicate", "spec.tags[1]")]

            wrong_kind = {**widget("kind"), "kind": "Gadget"}
            status, body = await call(http, "POST", base, body=wrong_kind)
            assert (status, body["reason"]) == (422, "Invalid"), body

            status, created = await call(http, "POST", base, body=widget("ok", tags=["a", "b"]))
            assert status == 201, created
            status, body = await call(http, "PATCH", f"{base}/ok", body={"spec": {"size": 2}}, content_type=STRATEGIC)
            assert (status, body["reason"]) == (415, "UnsupportedMediaType"), body
            assert body["message"] == (
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
        finally:
            await call(http, "DELETE", f"{CRD_PATH}/widgets.{group}")


async def test_discovery_lists_namespaces_finalize(cluster) -> None:
    async with cluster.session() as http:
        status, body = await call(http, "GET", "/api/v1")
    assert status == 200
    entries = {r["name"]: r for r in body["resources"]}
    assert entries["namespaces/finalize"]["verbs"] == ["update"]
    assert entries["namespaces/finalize"]["kind"] == "Namespace"


async def test_namespace_finalizers_change_only_through_finalize(cluster) -> None:
    name = f"{cluster.namespace}-fin"
    path = f"/api/v1/namespaces/{name}"
    async with cluster.session() as http:
        try:
            status, ns = await call(http, "POST", "/api/v1/namespaces", body={
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}, "spec": {"finalizers": []}})
            assert status == 201, ns
            assert ns["spec"]["finalizers"] == ["kubernetes"]  # required on create, whatever was sent
            # an ordinary update keeps spec.finalizers
            status, updated = await call(http, "PUT", f"/api/v1/namespaces/{name}",
                                         body={**ns, "spec": {"finalizers": []}})
            assert status == 200, updated
            assert updated["spec"]["finalizers"] == ["kubernetes"]
            body = {**updated, "spec": {"finalizers": []}}
            status, finalized = await call(http, "PUT", f"/api/v1/namespaces/{name}/finalize", body=body)
            assert status == 200, finalized
            assert not finalized["spec"].get("finalizers")
            assert finalized["status"]["phase"] == "Active"
            # /finalize gives it back as well, and the test must: the namespace controller never empties a
            # namespace without its `kubernetes` finalizer, so what controllers put in it (kube-root-ca.crt,
            # the default ServiceAccount) would keep it Terminating for good
            status, restored = await call(http, "PUT", f"{path}/finalize",
                                          body={**finalized, "spec": {"finalizers": ["kubernetes"]}})
            assert status == 200, restored
            assert restored["spec"]["finalizers"] == ["kubernetes"]
            assert await delete_and_wait(http, path) == 404
        finally:
            await _delete_namespace_with_its_finalizer(http, path)


async def _delete_namespace_with_its_finalizer(http: Any, path: str) -> None:
    status, ns = await call(http, "GET", path)
    if status != 200:
        return
    if "kubernetes" not in ((ns.get("spec") or {}).get("finalizers") or []):
        await call(http, "PUT", f"{path}/finalize", body={**ns, "spec": {"finalizers": ["kubernetes"]}})
    await call(http, "DELETE", path)
