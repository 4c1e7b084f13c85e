"""Create/get/update/delete: identity fields, resourceVersion rules, error Status bodies, generation."""

from __future__ import annotations

import pytest

from .helpers import APPLY, MERGE, call, cm_path, configmap, deployment

pytestmark = pytest.mark.integration


async def test_create_sets_identity_and_get_returns_it(cluster):
    async with cluster.session() as http:
        status, created = await call(http, "POST", cm_path(cluster.namespace), body=configmap("a", {"k": "v"}))
        assert status == 201
        meta = created["metadata"]
        assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
        assert int(meta["resourceVersion"]) > 0
        assert "generation" not in meta  # ConfigMaps have no generation
        status, got = await call(http, "GET", cm_path(cluster.namespace, "a"))
        assert status == 200
        assert got["metadata"]["uid"] == meta["uid"]
        assert got["data"] == {"k": "v"}
        assert (got["apiVersion"], got["kind"]) == ("v1", "ConfigMap")


async def test_resource_versions_increase_across_resources(cluster):
    versions = []
    async with cluster.session() as http:
        for i in range(3):
            _, obj = await call(http, "POST", cm_path(cluster.namespace), body=configmap(f"c{i}"))
            versions.append(int(obj["metadata"]["resourceVersion"]))
            _, secret = await call(http, "POST", f"/api/v1/namespaces/{cluster.namespace}/secrets",
                                   body={"metadata": {"name": f"s{i}"}, "stringData": {"a": "b"}})
            versions.append(int(secret["metadata"]["resourceVersion"]))
    assert versions == sorted(versions)
    assert len(set(versions)) == len(versions)


async def test_errors_are_status_objects(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        status, body = await call(http, "GET", cm_path(ns, "missing"))
        assert status == 404
        assert body["kind"] == "Status" and body["reason"] == "NotFound"
        assert body["message"] == 'configmaps "missing" not found'
        assert body["details"] == {"name": "missing", "kind": "configmaps"}

        await call(http, "POST", cm_path(ns), body=configmap("dup"))
        status, body = await call(http, "POST", cm_path(ns), body=configmap("dup"))
        assert (status, body["reason"]) == (409, "AlreadyExists")
        assert body["message"] == 'configmaps "dup" already exists'

        status, body = await call(http, "POST", cm_path(ns), body={"metadata": {}, "data": {}})
        assert (status, body["reason"]) == (422, "Invalid")
        assert body["details"]["causes"][0]["field"] == "metadata.name"

        status, body = await call(http, "POST", cm_path(ns), body=configmap("Not_Valid"))
        assert (status, body["reason"]) == (422, "Invalid")

        status, body = await call(http, "GET", f"/apis/apps/v1/namespaces/{ns}/deployments/nope")
        assert body["message"] == 'deployments.apps "nope" not found'
        assert body["details"] == {"name": "nope", "group": "apps", "kind": "deployments"}


async def test_update_with_stale_resource_version_conflicts(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        _, obj = await call(http, "POST", cm_path(ns), body=configmap("u", {"k": "1"}))
        fresh = dict(obj, data={"k": "2"})
        status, updated = await call(http, "PUT", cm_path(ns, "u"), body=fresh)
        assert status == 200
        assert int(updated["metadata"]["resourceVersion"]) > int(obj["metadata"]["resourceVersion"])
        stale = dict(obj, data={"k": "3"})
        status, body = await call(http, "PUT", cm_path(ns, "u"), body=stale)
        assert (status, body["reason"]) == (409, "Conflict")
        assert body["message"] == ('Operation cannot be fulfilled on configmaps "u": the object has been modified; '
                                   "please apply your changes to the latest version and try again")
        _, now = await call(http, "GET", cm_path(ns, "u"))
        assert now["data"] == {"k": "2"}


async def test_noop_update_keeps_resource_version(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        _, obj = await call(http, "POST", cm_path(ns), body=configmap("same", {"k": "v"}))
        status, again = await call(http, "PUT", cm_path(ns, "same"), body=obj)
        assert status == 200
        assert again["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]


async def test_namespace_must_exist(cluster):
    async with cluster.session() as http:
        status, body = await call(http, "POST", cm_path("no-such-namespace-x1"), body=configmap("a"))
        assert (status, body["reason"]) == (404, "NotFound")
        assert body["details"]["kind"] == "namespaces"
        status, body = await call(http, "GET", cm_path("no-such-namespace-x1"))
        assert status == 200 and body["items"] == []


async def test_deployment_generation_rules(cluster):
    ns = cluster.namespace
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/web"
    async with cluster.session() as http:
        status, obj = await call(http, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=deployment("web"))
        assert status == 201, obj
        assert obj["metadata"]["generation"] == 1
        _, obj = await call(http, "PATCH", path, body={"metadata": {"labels": {"x": "y"}}}, content_type=MERGE)
        assert obj["metadata"]["generation"] == 1
        _, obj = await call(http, "PATCH", path, body={"metadata": {"annotations": {"a": "b"}}}, content_type=MERGE)
        assert obj["metadata"]["generation"] == 2
        _, obj = await call(http, "PATCH", path, body={"spec": {"replicas": 3}}, content_type=MERGE)
        assert obj["metadata"]["generation"] == 3


async def test_delete_without_finalizers_removes(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        _, obj = await call(http, "POST", cm_path(ns), body=configmap("gone"))
        status, body = await call(http, "DELETE", cm_path(ns, "gone"), body={"propagationPolicy": "Background"})
        assert status == 200
        assert body["kind"] == "Status" and body["status"] == "Success"
        assert body["details"]["uid"] == obj["metadata"]["uid"]
        status, _ = await call(http, "GET", cm_path(ns, "gone"))
        assert status == 404
        status, body = await call(http, "DELETE", cm_path(ns, "gone"))
        assert (status, body["reason"]) == (404, "NotFound")


async def test_name_mismatch_is_bad_request(cluster):
    async with cluster.session() as http:
        _, obj = await call(http, "POST", cm_path(cluster.namespace), body=configmap("n1"))
        obj["metadata"]["name"] = "n2"
        status, body = await call(http, "PUT", cm_path(cluster.namespace, "n1"), body=obj)
        assert (status, body["reason"]) == (400, "BadRequest")


async def test_secret_string_data_becomes_base64_data(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        status, obj = await call(http, "POST", f"/api/v1/namespaces/{ns}/secrets",
                                 body={"metadata": {"name": "sd"}, "stringData": {"user": "admin"},
                                       "data": {"x": "eQ=="}})
        assert status == 201
        assert "stringData" not in obj
        assert obj["data"] == {"x": "eQ==", "user": "YWRtaW4="}
        assert obj["type"] == "Opaque"
        status, body = await call(http, "POST", f"/api/v1/namespaces/{ns}/secrets",
                                  body={"metadata": {"name": "bad"}, "data": {"x": "not base64!"}})
        assert (status, body["reason"]) == (400, "BadRequest")


async def test_service_gets_a_cluster_ip_that_updates_keep(cluster):
    ns = cluster.namespace
    svc = {"metadata": {"name": "svc"}, "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}}
    async with cluster.session() as http:
        status, obj = await call(http, "POST", f"/api/v1/namespaces/{ns}/services", body=svc)
        assert status == 201
        ip = obj["spec"]["clusterIP"]
        assert ip and obj["spec"]["clusterIPs"] == [ip] and obj["spec"]["type"] == "ClusterIP"
        svc["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
        svc["spec"]["ports"] = [{"port": 81}]
        status, updated = await call(http, "PUT", f"/api/v1/namespaces/{ns}/services/svc", body=svc)
        assert status == 200, updated
        assert updated["spec"]["clusterIP"] == ip


async def test_delete_preconditions(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        _, obj = await call(http, "POST", cm_path(ns), body=configmap("pre"))
        status, body = await call(http, "DELETE", cm_path(ns, "pre"),
                                  body={"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})
        assert (status, body["reason"]) == (409, "Conflict")
        assert body["message"].startswith('Operation cannot be fulfilled on ConfigMap "pre": the UID in the '
                                          "precondition (00000000-0000-0000-0000-000000000000) does not match")
        status, body = await call(http, "DELETE", cm_path(ns, "pre"), body={"preconditions": {"resourceVersion": "1"}})
        assert (status, body["reason"]) == (409, "Conflict")
        assert "the ResourceVersion in the precondition (1) does not match" in body["message"]
        status, _ = await call(http, "DELETE", cm_path(ns, "pre"),
                               body={"preconditions": {"uid": obj["metadata"]["uid"],
                                                       "resourceVersion": obj["metadata"]["resourceVersion"]}})
        assert status == 200


async def test_delete_collection_with_label_selector(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        for name, group in (("d1", "x"), ("d2", "x"), ("d3", "y")):
            await call(http, "POST", cm_path(ns), body=configmap(name, labels={"group": group}))
        status, _ = await call(http, "DELETE", cm_path(ns), params={"labelSelector": "group=x"})
        assert status == 200
        _, listed = await call(http, "GET", cm_path(ns), params={"labelSelector": "group"})
        assert [i["metadata"]["name"] for i in listed["items"]] == ["d3"]


async def test_undeclared_fields_of_built_ins_are_dropped_or_refused(cluster):
    ns = cluster.namespace
    body = deployment("typo")
    body["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    path = f"/apis/apps/v1/namespaces/{ns}/deployments"
    async with cluster.session() as http:
        async with http.post(path, json=body) as resp:
            assert resp.status == 201
            created = await resp.json()
            assert "unknown field" in resp.headers.get("Warning", "")
        assert "imagePullPolcy" not in created["spec"]["template"]["spec"]["containers"][0]
        body["metadata"]["name"] = "typo2"
        status, err = await call(http, "POST", path, body=body, params={"fieldValidation": "Strict"})
        assert (status, err["reason"]) == (400, "BadRequest")
        assert ('unknown field "spec.template.spec.containers[0].imagePullPolcy"' in err["message"])
        status, err = await call(http, "PATCH", f"{path}/typo3", body={**body, "metadata": {"name": "typo3"}},
                                 content_type=APPLY, params={"fieldManager": "m"})
        assert status == 500 and "field not declared in schema" in err["message"]
