"""PATCH in merge, JSON and strategic flavours; immutable fields; unsupported patch types."""

from __future__ import annotations

import pytest

from .helpers import JSON_PATCH, MERGE, STRATEGIC, call, cm_path, configmap, deployment

pytestmark = pytest.mark.integration


async def test_merge_patch_merges_maps_and_null_deletes(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        await call(http, "POST", cm_path(ns), body=configmap("m", {"a": "1", "b": "2"}))
        status, obj = await call(http, "PATCH", cm_path(ns, "m"), body={"data": {"b": None, "c": "3"}},
                                 content_type=MERGE)
        assert status == 200
        assert obj["data"] == {"a": "1", "c": "3"}


async def test_json_patch_and_failed_test_operation(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        await call(http, "POST", cm_path(ns), body=configmap("j", {"a": "1"}))
        status, obj = await call(http, "PATCH", cm_path(ns, "j"), content_type=JSON_PATCH, body=[
            {"op": "test", "path": "/data/a", "value": "1"},
            {"op": "add", "path": "/data/b", "value": "2"},
            {"op": "remove", "path": "/data/a"},
        ])
        assert status == 200
        assert obj["data"] == {"b": "2"}
        status, body = await call(http, "PATCH", cm_path(ns, "j"), content_type=JSON_PATCH, body=[
            {"op": "test", "path": "/data/b", "value": "nope"}])
        assert status == 422 and body["kind"] == "Status"
        _, obj = await call(http, "GET", cm_path(ns, "j"))
        assert obj["data"] == {"b": "2"}


async def test_strategic_merge_patch_merges_containers_by_name(cluster):
    ns = cluster.namespace
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/s"
    async with cluster.session() as http:
        body = deployment("s")
        body["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
        status, _ = await call(http, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=body)
        assert status == 201
        patch = {"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "nginx:2", "env": [{"name": "B", "value": "2"}]},
            {"name": "sidecar", "image": "busybox"},
        ]}}}}
        status, obj = await call(http, "PATCH", path, body=patch, content_type=STRATEGIC)
        assert status == 200, obj
        containers = obj["spec"]["template"]["spec"]["containers"]
        assert [c["name"] for c in containers] == ["app", "sidecar"]
        assert containers[0]["image"] == "nginx:2"
        # apimachinery puts an item only the patch has ahead of the live-only one (normalizeElementOrder)
        assert [e["name"] for e in containers[0]["env"]] == ["B", "A"]
        delete = {"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}}}
        _, obj = await call(http, "PATCH", path, body=delete, content_type=STRATEGIC)
        assert [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]] == ["app"]


async def test_strategic_merge_patch_is_refused_for_custom_resources(cluster):
    ns = cluster.namespace
    path = f"/apis/source.toolkit.fluxcd.io/v1/namespaces/{ns}/gitrepositories"
    async with cluster.session() as http:
        status, _ = await call(http, "POST", path, body={
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository", "metadata": {"name": "g"},
            "spec": {"url": "https://example.com/repo.git", "interval": "1m"}})
        assert status == 201
        status, body = await call(http, "PATCH", f"{path}/g", body={"spec": {"interval": "2m"}},
                                  content_type=STRATEGIC)
        assert (status, body["reason"]) == (415, "UnsupportedMediaType")


async def test_unknown_patch_content_type(cluster):
    async with cluster.session() as http:
        await call(http, "POST", cm_path(cluster.namespace), body=configmap("u"))
        status, body = await call(http, "PATCH", cm_path(cluster.namespace, "u"), body={"data": {}},
                                  content_type="application/json")
        assert (status, body["reason"]) == (415, "UnsupportedMediaType")


async def test_deployment_selector_is_immutable(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        await call(http, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=deployment("imm"))
        status, body = await call(http, "PATCH", f"/apis/apps/v1/namespaces/{ns}/deployments/imm",
                                  body={"spec": {"selector": {"matchLabels": {"app": "other"}},
                                                 "template": {"metadata": {"labels": {"app": "other"}}}}},
                                  content_type=MERGE)
        assert (status, body["reason"]) == (422, "Invalid")
        assert "spec.selector" in [c["field"] for c in body["details"]["causes"]]
        assert body["message"].startswith('Deployment.apps "imm" is invalid: ')


async def test_job_template_is_immutable(cluster):
    ns = cluster.namespace
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job"},
           "spec": {"template": {"spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "c", "image": "busybox"}]}}}}
    async with cluster.session() as http:
        status, created = await call(http, "POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body=job)
        assert status == 201, created
        patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}}}
        status, body = await call(http, "PATCH", f"/apis/batch/v1/namespaces/{ns}/jobs/job", body=patch,
                                  content_type=STRATEGIC)
        assert (status, body["reason"]) == (422, "Invalid")
        assert "spec.template" in [c["field"] for c in body["details"]["causes"]]


async def test_service_cluster_ip_is_immutable(cluster):
    ns = cluster.namespace
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
           "spec": {"clusterIP": "None", "selector": {"app": "x"}, "ports": [{"port": 80}]}}
    async with cluster.session() as http:
        status, created = await call(http, "POST", f"/api/v1/namespaces/{ns}/services", body=svc)
        assert status == 201, created
        status, body = await call(http, "PATCH", f"/api/v1/namespaces/{ns}/services/svc",
                                  body={"spec": {"clusterIP": "10.0.0.77"}}, content_type=MERGE)
        assert (status, body["reason"]) == (422, "Invalid")
        assert "spec.clusterIP" in [c["field"] for c in body["details"]["causes"]] or any(
            "spec.clusterIP" in c["field"] for c in body["details"]["causes"])


async def test_patch_missing_object_is_not_found(cluster):
    async with cluster.session() as http:
        status, body = await call(http, "PATCH", cm_path(cluster.namespace, "absent"), body={"data": {}},
                                  content_type=MERGE)
        assert (status, body["reason"]) == (404, "NotFound")
