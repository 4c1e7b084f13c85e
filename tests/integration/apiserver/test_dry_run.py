"""dryRun=All on every write: validation and the would-be object, nothing stored, no watch event."""

from __future__ import annotations

import pytest

from .helpers import APPLY, MERGE, call, cm_path, configmap, read_watch

pytestmark = pytest.mark.integration

DRY = {"dryRun": "All"}


async def _list_rv(http, ns):
    _, listed = await call(http, "GET", cm_path(ns))
    return listed["metadata"]["resourceVersion"]


async def test_dry_run_create_returns_object_and_stores_nothing(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        start = await _list_rv(http, ns)
        status, obj = await call(http, "POST", cm_path(ns), body=configmap("dry", {"a": "1"}), params=DRY)
        assert status == 201
        assert obj["metadata"]["uid"]
        assert not obj["metadata"].get("resourceVersion")
        assert obj["data"] == {"a": "1"}
        status, _ = await call(http, "GET", cm_path(ns, "dry"))
        assert status == 404
        status, body = await call(http, "POST", cm_path(ns), body=configmap("Bad_Name"), params=DRY)
        assert (status, body["reason"]) == (422, "Invalid")
        await call(http, "POST", cm_path(ns), body=configmap("real"))
        events = await read_watch(http, cm_path(ns), {"resourceVersion": start, "timeoutSeconds": "2"}, until=1)
    assert events[0]["object"]["metadata"]["name"] == "real"


async def test_dry_run_does_not_consume_resource_versions(cluster):
    server = cluster.require_server()
    ns = cluster.namespace
    async with cluster.session() as http:
        await call(http, "POST", cm_path(ns), body=configmap("base", {"a": "1"}))
        before = server.resource_version
        await call(http, "POST", cm_path(ns), body=configmap("d1"), params=DRY)
        await call(http, "PATCH", cm_path(ns, "base"), body={"data": {"a": "2"}}, content_type=MERGE, params=DRY)
        await call(http, "PATCH", cm_path(ns, "base"), body=configmap("base", {"a": "3"}), content_type=APPLY,
                   params={**DRY, "fieldManager": "m", "force": "true"})
        await call(http, "DELETE", cm_path(ns, "base"), params=DRY)
        assert server.resource_version == before


async def test_dry_run_update_patch_apply_delete_leave_object_unchanged(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        _, obj = await call(http, "POST", cm_path(ns), body=configmap("keep", {"a": "1"}))
        status, patched = await call(http, "PATCH", cm_path(ns, "keep"), body={"data": {"a": "2"}},
                                     content_type=MERGE, params=DRY)
        assert status == 200 and patched["data"] == {"a": "2"}
        status, applied = await call(http, "PATCH", cm_path(ns, "keep"), body=configmap("keep", {"a": "3"}),
                                     content_type=APPLY, params={**DRY, "fieldManager": "m", "force": "true"})
        assert status == 200 and applied["data"] == {"a": "3"}
        status, put = await call(http, "PUT", cm_path(ns, "keep"), body=dict(obj, data={"a": "4"}), params=DRY)
        assert status == 200 and put["data"] == {"a": "4"}
        status, _ = await call(http, "DELETE", cm_path(ns, "keep"), params=DRY)
        assert status == 200
        status, now = await call(http, "GET", cm_path(ns, "keep"))
        assert status == 200
        assert now["data"] == {"a": "1"}
        assert now["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]


async def test_dry_run_apply_reports_conflicts(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        await call(http, "POST", cm_path(ns), body=configmap("dc", {"a": "1"}), params={"fieldManager": "owner"})
        status, body = await call(http, "PATCH", cm_path(ns, "dc"), body=configmap("dc", {"a": "2"}),
                                  content_type=APPLY, params={**DRY, "fieldManager": "other"})
        assert (status, body["reason"]) == (409, "Conflict")


async def test_invalid_dry_run_value(cluster):
    async with cluster.session() as http:
        status, _ = await call(http, "POST", cm_path(cluster.namespace), body=configmap("x"),
                               params={"dryRun": "Maybe"})
        assert status in (400, 422)


async def test_dry_run_delete_in_the_delete_options_body(cluster):
    """DeleteOptions.dryRun in the body counts as the query parameter does (the Go client sends it so)."""
    ns = cluster.namespace
    async with cluster.session() as http:
        _, obj = await call(http, "POST", cm_path(ns), body=configmap("keep", {"a": "1"}))
        status, _ = await call(http, "DELETE", cm_path(ns, "keep"),
                               body={"apiVersion": "v1", "kind": "DeleteOptions", "dryRun": ["All"]})
        assert status == 200
        status, now = await call(http, "GET", cm_path(ns, "keep"))
        assert status == 200
        assert now["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
        status, body = await call(http, "DELETE", cm_path(ns, "keep"),
                                  body={"apiVersion": "v1", "kind": "DeleteOptions", "dryRun": ["Maybe"]})
        assert (status, body["reason"]) == (422, "Invalid")
