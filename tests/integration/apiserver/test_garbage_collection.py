"""Owner references: deleting an owner deletes its dependents (or orphans them on request)."""

from __future__ import annotations

import asyncio

import pytest

from .helpers import call, cm_path, configmap

pytestmark = pytest.mark.integration


def owned(name: str, *owners: dict) -> dict:
    body = configmap(name)
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": o["metadata"]["name"], "uid": o["metadata"]["uid"]}
        for o in owners]
    return body


async def _gone(http, path: str) -> bool:
    for _ in range(300):  # a real garbage collector is asynchronous
        status, _ = await call(http, "GET", path)
        if status == 404:
            return True
        await asyncio.sleep(0.1)
    return False


async def test_background_deletion_removes_dependents_of_gone_owners(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        _, owner = await call(http, "POST", cm_path(ns), body=configmap("owner"))
        _, other = await call(http, "POST", cm_path(ns), body=configmap("other-owner"))
        await call(http, "POST", cm_path(ns), body=owned("child", owner))
        await call(http, "POST", cm_path(ns), body=owned("shared", owner, other))
        status, _ = await call(http, "DELETE", cm_path(ns, "owner"), body={"propagationPolicy": "Background"})
        assert status == 200
        assert await _gone(http, cm_path(ns, "child"))
        for _ in range(300):
            _, shared = await call(http, "GET", cm_path(ns, "shared"))
            refs = [r["name"] for r in shared["metadata"].get("ownerReferences", [])]
            if refs == ["other-owner"]:
                break
            await asyncio.sleep(0.1)
        assert refs == ["other-owner"]


async def test_orphan_keeps_dependents_and_drops_the_reference(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        _, owner = await call(http, "POST", cm_path(ns), body=configmap("owner"))
        await call(http, "POST", cm_path(ns), body=owned("orphan", owner))
        status, _ = await call(http, "DELETE", cm_path(ns, "owner"), params={"propagationPolicy": "Orphan"})
        assert status == 200
        assert await _gone(http, cm_path(ns, "owner"))
        for _ in range(300):
            status, child = await call(http, "GET", cm_path(ns, "orphan"))
            if not child["metadata"].get("ownerReferences"):
                break
            await asyncio.sleep(0.1)
        assert status == 200 and not child["metadata"].get("ownerReferences")


async def test_foreground_deletion_answers_with_the_marked_object(cluster):
    ns = cluster.namespace
    path = f"/apis/apps/v1/namespaces/{ns}/deployments"
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "fg"},
                  "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "fg"}},
                           "template": {"metadata": {"labels": {"app": "fg"}},
                                        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}}
    async with cluster.session() as http:
        _, owner = await call(http, "POST", path, body=deployment)
        dependent = configmap("fg-dependent")
        dependent["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "fg",
                                                     "uid": owner["metadata"]["uid"], "blockOwnerDeletion": True}]
        await call(http, "POST", cm_path(ns), body=dependent)
        status, answer = await call(http, "DELETE", f"{path}/fg", body={"propagationPolicy": "Foreground"})
        assert status == 200, answer
        assert answer["kind"] == "Deployment"
        assert answer["metadata"]["deletionTimestamp"]
        assert answer["metadata"]["finalizers"] == ["foregroundDeletion"]
        assert await _gone(http, cm_path(ns, "fg-dependent"))
        assert await _gone(http, f"{path}/fg")
