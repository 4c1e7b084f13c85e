"""Finalizers and deletionTimestamp; namespace deletion."""

from __future__ import annotations

import asyncio

import pytest

from .helpers import JSON_PATCH, MERGE, call, cm_path, configmap, delete_and_wait, read_watch, release

pytestmark = pytest.mark.integration


async def test_finalizer_flow(cluster):
    ns = cluster.namespace
    body = configmap("fin")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    async with cluster.session() as http:
        try:
            _, obj = await call(http, "POST", cm_path(ns), body=body)
            start = obj["metadata"]["resourceVersion"]
            status, marked = await call(http, "DELETE", cm_path(ns, "fin"))
            assert status == 200
            assert marked["metadata"]["deletionTimestamp"]
            status, still = await call(http, "GET", cm_path(ns, "fin"))
            assert status == 200 and still["metadata"]["deletionTimestamp"]

            status, body = await call(http, "PATCH", cm_path(ns, "fin"), content_type=MERGE,
                                      body={"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}})
            assert (status, body["reason"]) == (422, "Invalid")

            status, again = await call(http, "DELETE", cm_path(ns, "fin"))
            assert status == 200 and again["metadata"]["deletionTimestamp"] == marked["metadata"]["deletionTimestamp"]

            status, _ = await call(http, "PATCH", cm_path(ns, "fin"), content_type=JSON_PATCH,
                                   body=[{"op": "remove", "path": "/metadata/finalizers"}])
            assert status == 200
            status, _ = await call(http, "GET", cm_path(ns, "fin"))
            assert status == 404
            events = await read_watch(http, cm_path(ns), {"resourceVersion": start, "timeoutSeconds": "2"}, until=2)
        finally:
            await release(http, cm_path(ns, "fin"))
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]


async def test_delete_of_custom_resource_with_finalizer_bumps_generation(cluster):
    ns = cluster.namespace
    path = f"/apis/source.toolkit.fluxcd.io/v1/namespaces/{ns}/gitrepositories"
    repo = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "g", "finalizers": ["finalizers.fluxcd.io"]},
            "spec": {"url": "https://example.com/r.git", "interval": "1m"}}
    async with cluster.session() as http:
        try:
            _, obj = await call(http, "POST", path, body=repo)
            status, marked = await call(http, "DELETE", f"{path}/g")
            assert status == 200
            assert marked["metadata"]["generation"] == obj["metadata"]["generation"] + 1
        finally:
            await release(http, f"{path}/g")  # no source-controller here to do it


async def test_namespace_deletion_removes_contents(cluster):
    name = cluster.namespace + "-del"
    async with cluster.session() as http:
        try:
            status, _ = await call(http, "POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
            assert status == 201
            await call(http, "POST", cm_path(name), body=configmap("inside"))
            held = configmap("held")
            held["metadata"]["finalizers"] = ["example.com/hold"]
            await call(http, "POST", cm_path(name), body=held)
            status, ns = await call(http, "DELETE", f"/api/v1/namespaces/{name}")
            assert status == 200
            assert ns["metadata"]["deletionTimestamp"]
            for _ in range(600):  # a real namespace controller takes a few seconds
                status, _ = await call(http, "GET", cm_path(name, "inside"))
                if status == 404:
                    break
                await asyncio.sleep(0.1)
            assert status == 404
            status, body = await call(http, "POST", cm_path(name), body=configmap("late"))
            assert (status, body["reason"]) == (403, "Forbidden")
            assert body["details"]["causes"][0]["reason"] == "NamespaceTerminating"
            status, ns = await call(http, "GET", f"/api/v1/namespaces/{name}")
            assert status == 200 and ns["status"]["phase"] == "Terminating"
            await call(http, "PATCH", cm_path(name, "held"), content_type=MERGE,
                       body={"metadata": {"finalizers": None}})
            assert await delete_and_wait(http, f"/api/v1/namespaces/{name}") == 404
        finally:
            await release(http, cm_path(name, "held"))
            await call(http, "DELETE", f"/api/v1/namespaces/{name}")
