"""core/v1 and events.k8s.io/v1 Events are one resource seen through two APIs (plain HTTP: holds on a real
cluster too)."""

from __future__ import annotations

from typing import Any

import pytest

from .helpers import call, read_watch

pytestmark = pytest.mark.integration


def core_path(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/events" + (f"/{name}" if name else "")


def events_path(ns: str, name: str = "") -> str:
    return f"/apis/events.k8s.io/v1/namespaces/{ns}/events" + (f"/{name}" if name else "")


def core_event(ns: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
        "involvedObject": {"kind": "ConfigMap", "namespace": ns, "name": "cm", "apiVersion": "v1"},
        "reason": "Tested", "message": "through core", "type": "Normal", "count": 1,
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
        "source": {"component": "tester"}, "reportingComponent": "tester", "reportingInstance": "tester-1",
    }


def new_event(ns: str, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
        "regarding": {"kind": "ConfigMap", "namespace": ns, "name": "cm", "apiVersion": "v1"},
        "reason": "Tested", "note": "through events.k8s.io", "type": "Warning", "action": "Testing",
        "reportingController": "example.com/tester", "reportingInstance": "tester-1", **extra,
    }


async def test_a_core_event_reads_through_events_k8s_io(cluster) -> None:
    ns = cluster.namespace
    async with cluster.session() as http:
        status, created = await call(http, "POST", core_path(ns), body=core_event(ns, "old-style"))
        assert status == 201, created
        status, seen = await call(http, "GET", events_path(ns, "old-style"))
    assert status == 200, seen
    assert seen["apiVersion"] == "events.k8s.io/v1"
    assert seen["metadata"]["uid"] == created["metadata"]["uid"]
    assert seen["reason"] == "Tested" and seen["type"] == "Normal"
    assert seen["note"] == "through core"
    assert seen["regarding"]["name"] == "cm"
    assert seen["reportingController"] == "tester"
    assert seen["deprecatedCount"] == 1
    assert seen["deprecatedFirstTimestamp"] == "2026-01-01T00:00:00Z"
    assert seen["deprecatedSource"] == {"component": "tester"}
    assert seen["eventTime"] is None
    assert "message" not in seen and "involvedObject" not in seen


async def test_an_events_k8s_io_event_reads_and_lists_through_core(cluster) -> None:
    ns = cluster.namespace
    when = "2026-01-01T00:00:00.000000Z"
    async with cluster.session() as http:
        status, created = await call(http, "POST", events_path(ns), body=new_event(ns, "new-style", eventTime=when))
        assert status == 201, created
        assert created["note"] == "through events.k8s.io"
        status, seen = await call(http, "GET", core_path(ns, "new-style"))
        assert status == 200, seen
        _, listed = await call(http, "GET", core_path(ns))
        _, listed_new = await call(http, "GET", events_path(ns))
    assert seen["apiVersion"] == "v1"
    assert seen["message"] == "through events.k8s.io"
    assert seen["reason"] == "Tested" and seen["type"] == "Warning"
    assert seen["reportingComponent"] == "example.com/tester"
    assert seen["involvedObject"]["name"] == "cm"
    assert seen["eventTime"] == when
    assert seen["firstTimestamp"] is None and seen["lastTimestamp"] is None
    assert [e["metadata"]["name"] for e in listed["items"]] == ["new-style"]
    assert [e["note"] for e in listed_new["items"]] == ["through events.k8s.io"]


async def test_events_k8s_io_requires_event_time(cluster) -> None:
    ns = cluster.namespace
    async with cluster.session() as http:
        status, body = await call(http, "POST", events_path(ns), body=new_event(ns, "no-time"))
    assert (status, body["reason"]) == (422, "Invalid"), body
    causes = body["details"]["causes"]
    assert {"reason": "FieldValueRequired", "field": "eventTime"} in [
        {k: c[k] for k in ("reason", "field")} for c in causes]


async def test_a_watch_through_one_api_sees_writes_through_the_other(cluster) -> None:
    ns = cluster.namespace
    async with cluster.session() as http:
        _, listed = await call(http, "GET", events_path(ns))
        start = listed["metadata"]["resourceVersion"]
        await call(http, "POST", core_path(ns), body=core_event(ns, "watched"))
        events = await read_watch(http, events_path(ns), {"resourceVersion": start, "timeoutSeconds": "5"}, until=1)
    assert events[0]["type"] == "ADDED"
    assert events[0]["object"]["note"] == "through core"


async def test_field_selectors_through_either_api(cluster) -> None:
    ns = cluster.namespace
    async with cluster.session() as http:
        await call(http, "POST", core_path(ns), body=core_event(ns, "selected"))
        _, core = await call(http, "GET", core_path(ns), params={"fieldSelector": "involvedObject.name=cm"})
        _, new = await call(http, "GET", events_path(ns), params={"fieldSelector": "regarding.name=cm"})
        _, none = await call(http, "GET", events_path(ns), params={"fieldSelector": "regarding.name=other"})
    assert [e["metadata"]["name"] for e in core["items"]] == ["selected"]
    assert [e["metadata"]["name"] for e in new["items"]] == ["selected"]
    assert none["items"] == []
