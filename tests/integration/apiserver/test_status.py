"""The /status subresource: status writes change only status; main writes ignore status; generation."""

from __future__ import annotations

import pytest

from .helpers import MERGE, call, deployment

pytestmark = pytest.mark.integration

GIT = "/apis/source.toolkit.fluxcd.io/v1/namespaces/{ns}/gitrepositories"


def gitrepo(name: str) -> dict:
    return {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository", "metadata": {"name": name},
            "spec": {"url": "https://example.com/repo.git", "interval": "1m"}}


async def test_create_drops_status_for_kinds_with_the_subresource(cluster):
    body = gitrepo("s0")
    body["status"] = {"observedGeneration": 7}
    async with cluster.session() as http:
        status, obj = await call(http, "POST", GIT.format(ns=cluster.namespace), body=body)
        assert status == 201
        # the client's status is dropped; the CRD's schema default for status applies
        assert obj["status"] == {"observedGeneration": -1}


async def test_status_writes_touch_only_status(cluster):
    path = GIT.format(ns=cluster.namespace) + "/s1"
    async with cluster.session() as http:
        _, obj = await call(http, "POST", GIT.format(ns=cluster.namespace), body=gitrepo("s1"))
        status, after = await call(http, "PATCH", path + "/status", content_type=MERGE, body={
            "metadata": {"labels": {"ignored": "yes"}}, "spec": {"interval": "9m"},
            "status": {"observedGeneration": 1, "conditions": []}})
        assert status == 200, after
        assert after["status"]["observedGeneration"] == 1
        assert after["spec"]["interval"] == "1m"
        assert "ignored" not in (after["metadata"].get("labels") or {})
        assert after["metadata"]["generation"] == obj["metadata"]["generation"]
        assert int(after["metadata"]["resourceVersion"]) > int(obj["metadata"]["resourceVersion"])


async def test_main_resource_writes_ignore_status(cluster):
    path = GIT.format(ns=cluster.namespace) + "/s2"
    async with cluster.session() as http:
        await call(http, "POST", GIT.format(ns=cluster.namespace), body=gitrepo("s2"))
        await call(http, "PATCH", path + "/status", content_type=MERGE, body={"status": {"observedGeneration": 1}})
        status, after = await call(http, "PATCH", path, content_type=MERGE, body={
            "spec": {"interval": "5m"}, "status": {"observedGeneration": 42}})
        assert status == 200
        assert after["status"]["observedGeneration"] == 1
        assert after["spec"]["interval"] == "5m"
        assert after["metadata"]["generation"] == 2


async def test_status_put_with_stale_resource_version_conflicts(cluster):
    path = GIT.format(ns=cluster.namespace) + "/s3"
    async with cluster.session() as http:
        _, obj = await call(http, "POST", GIT.format(ns=cluster.namespace), body=gitrepo("s3"))
        await call(http, "PATCH", path, content_type=MERGE, body={"spec": {"interval": "2m"}})
        obj["status"] = {"observedGeneration": 1}
        status, body = await call(http, "PUT", path + "/status", body=obj)
        assert (status, body["reason"]) == (409, "Conflict")


async def test_deployment_status_does_not_bump_generation(cluster):
    ns = cluster.namespace
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/st"
    async with cluster.session() as http:
        await call(http, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=deployment("st"))
        status, obj = await call(http, "PATCH", path + "/status", content_type=MERGE,
                                 body={"status": {"observedGeneration": 1, "replicas": 1}})
        assert status == 200
        assert obj["metadata"]["generation"] == 1 and obj["status"]["replicas"] == 1


async def test_configmap_has_no_status_subresource(cluster):
    async with cluster.session() as http:
        status, _ = await call(http, "GET", f"/api/v1/namespaces/{cluster.namespace}/configmaps/x/status")
        assert status == 404


async def test_status_subresource_only_reads_and_writes(cluster):
    path = GIT.format(ns=cluster.namespace) + "/s5"
    async with cluster.session() as http:
        await call(http, "POST", GIT.format(ns=cluster.namespace), body=gitrepo("s5"))
        status, obj = await call(http, "GET", path + "/status")
        assert status == 200 and obj["metadata"]["name"] == "s5"
        status, body = await call(http, "DELETE", path + "/status")
        assert (status, body["reason"]) == (405, "MethodNotAllowed")
        status, _ = await call(http, "GET", path)
        assert status == 200
