"""List: label and field selectors, pagination with limit/continue, list resourceVersion, scopes."""

from __future__ import annotations

import pytest

from .helpers import MERGE, call, cm_path, configmap

pytestmark = pytest.mark.integration

LABELS = {
    "a": {"tier": "web", "env": "prod"},
    "b": {"tier": "web", "env": "dev"},
    "c": {"tier": "db", "env": "prod"},
    "d": {"tier": "db"},
}


async def _seed(http, ns):
    for name, labels in LABELS.items():
        status, _ = await call(http, "POST", cm_path(ns), body=configmap(name, labels={**labels, "set": "sel"}))
        assert status == 201


@pytest.mark.parametrize(("selector", "expected"), [
    ("set=sel,tier=web", {"a", "b"}),
    ("set=sel,tier==db", {"c", "d"}),
    ("set=sel,env!=prod", {"b", "d"}),
    ("set=sel,env in (prod, dev)", {"a", "b", "c"}),
    ("set=sel,env notin (prod)", {"b", "d"}),
    ("set=sel,env", {"a", "b", "c"}),
    ("set=sel,!env", {"d"}),
    ("set=sel,tier=web,env=prod", {"a"}),
])
async def test_label_selectors(cluster, selector, expected):
    async with cluster.session() as http:
        await _seed(http, cluster.namespace)
        status, body = await call(http, "GET", cm_path(cluster.namespace), params={"labelSelector": selector})
        assert status == 200
        assert {i["metadata"]["name"] for i in body["items"]} == expected


async def test_bad_label_selector_is_bad_request(cluster):
    async with cluster.session() as http:
        status, body = await call(http, "GET", cm_path(cluster.namespace), params={"labelSelector": "a in (b"})
        assert (status, body["reason"]) == (400, "BadRequest")


async def test_field_selectors(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        await _seed(http, ns)
        _, body = await call(http, "GET", cm_path(ns), params={"fieldSelector": "metadata.name=c"})
        assert [i["metadata"]["name"] for i in body["items"]] == ["c"]
        _, body = await call(http, "GET", cm_path(ns), params={"fieldSelector": "metadata.name!=c",
                                                                "labelSelector": "set=sel"})
        assert {i["metadata"]["name"] for i in body["items"]} == {"a", "b", "d"}
        _, body = await call(http, "GET", "/api/v1/configmaps",
                             params={"fieldSelector": f"metadata.namespace={ns}", "labelSelector": "set=sel"})
        assert {i["metadata"]["namespace"] for i in body["items"]} == {ns}
        assert len(body["items"]) == 4
        status, body = await call(http, "GET", cm_path(ns), params={"fieldSelector": "data.x=y"})
        assert (status, body["reason"]) == (400, "BadRequest")


async def test_pagination_visits_every_item_once_in_order(cluster):
    ns = cluster.namespace
    names = [f"p{i:02d}" for i in range(11)]
    async with cluster.session() as http:
        for name in names:
            await call(http, "POST", cm_path(ns), body=configmap(name, labels={"page": "yes"}))
        seen: list[str] = []
        token = None
        pages = 0
        first_rv = None
        while True:
            params = {"limit": "4", "labelSelector": "page=yes"}
            if token:
                params["continue"] = token
            status, body = await call(http, "GET", cm_path(ns), params=params)
            assert status == 200
            first_rv = first_rv or body["metadata"]["resourceVersion"]
            pages += 1
            seen.extend(i["metadata"]["name"] for i in body["items"])
            token = body["metadata"].get("continue")
            if not token:
                break
        assert seen == names
        assert pages == 3
        status, body = await call(http, "GET", cm_path(ns), params={"limit": "5"})
        assert len(body["items"]) == 5 and body["metadata"]["continue"]


async def test_remaining_item_count_without_selectors(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        for i in range(5):
            await call(http, "POST", f"/api/v1/namespaces/{ns}/secrets", body={"metadata": {"name": f"s{i}"}})
        _, body = await call(http, "GET", f"/api/v1/namespaces/{ns}/secrets", params={"limit": "2"})
        assert body["metadata"]["remainingItemCount"] == 3


async def test_list_resource_version_covers_items(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        _, obj = await call(http, "POST", cm_path(ns), body=configmap("rv"))
        _, body = await call(http, "GET", cm_path(ns))
        assert int(body["metadata"]["resourceVersion"]) >= int(obj["metadata"]["resourceVersion"])
        assert body["kind"] == "ConfigMapList" and body["apiVersion"] == "v1"


async def test_cluster_scoped_list(cluster):
    async with cluster.session() as http:
        _, body = await call(http, "GET", "/api/v1/namespaces", params={"fieldSelector":
                                                                         f"metadata.name={cluster.namespace}"})
        assert [i["metadata"]["name"] for i in body["items"]] == [cluster.namespace]
        status, _ = await call(http, "GET", f"/api/v1/namespaces/{cluster.namespace}/namespaces")
        assert status == 404


async def test_continue_pages_come_from_the_first_pages_snapshot(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        for name in ("s1", "s2", "s3", "s4"):
            await call(http, "POST", cm_path(ns), body=configmap(name, {"v": "old"}, labels={"snap": "yes"}))
        _, first = await call(http, "GET", cm_path(ns), params={"limit": "2", "labelSelector": "snap=yes"})
        assert [i["metadata"]["name"] for i in first["items"]] == ["s1", "s2"]
        await call(http, "DELETE", cm_path(ns, "s3"))
        await call(http, "PATCH", cm_path(ns, "s4"), body={"data": {"v": "new"}}, content_type=MERGE)
        await call(http, "POST", cm_path(ns), body=configmap("s5", labels={"snap": "yes"}))
        _, rest = await call(http, "GET", cm_path(ns), params={
            "limit": "10", "labelSelector": "snap=yes", "continue": first["metadata"]["continue"]})
        assert [(i["metadata"]["name"], i["data"]["v"]) for i in rest["items"]] == [("s3", "old"), ("s4", "old")]
        assert rest["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        _, fresh = await call(http, "GET", cm_path(ns), params={"labelSelector": "snap=yes"})
        assert [i["metadata"]["name"] for i in fresh["items"]] == ["s1", "s2", "s4", "s5"]


async def test_exact_resource_version_lists_past_state(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        await call(http, "POST", cm_path(ns), body=configmap("e1", {"v": "1"}, labels={"exact": "yes"}))
        _, before = await call(http, "GET", cm_path(ns), params={"labelSelector": "exact=yes"})
        rv = before["metadata"]["resourceVersion"]
        await call(http, "PATCH", cm_path(ns, "e1"), body={"data": {"v": "2"}}, content_type=MERGE)
        await call(http, "POST", cm_path(ns), body=configmap("e2", labels={"exact": "yes"}))
        status, then = await call(http, "GET", cm_path(ns), params={
            "labelSelector": "exact=yes", "resourceVersion": rv, "resourceVersionMatch": "Exact"})
        assert status == 200
        assert [(i["metadata"]["name"], i["data"]["v"]) for i in then["items"]] == [("e1", "1")]
        assert then["metadata"]["resourceVersion"] == rv
