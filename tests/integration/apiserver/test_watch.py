"""Watch: resume from a resourceVersion, event types and order, bookmarks, timeouts, selectors, 410."""

from __future__ import annotations

import asyncio

import pytest

from .helpers import MERGE, call, cm_path, configmap, read_watch

pytestmark = pytest.mark.integration


async def test_watch_from_resource_version_replays_in_order(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        _, listed = await call(http, "GET", cm_path(ns))
        start = listed["metadata"]["resourceVersion"]
        _, a = await call(http, "POST", cm_path(ns), body=configmap("w1", {"k": "1"}))
        await call(http, "PATCH", cm_path(ns, "w1"), body={"data": {"k": "2"}}, content_type=MERGE)
        await call(http, "DELETE", cm_path(ns, "w1"))
        events = await read_watch(http, cm_path(ns), {"resourceVersion": start, "timeoutSeconds": "2"}, until=3)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert events[1]["object"]["data"] == {"k": "2"}
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == 3
    assert events[0]["object"]["metadata"]["uid"] == a["metadata"]["uid"]


async def test_watch_without_resource_version_starts_with_current_state(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        await call(http, "POST", cm_path(ns), body=configmap("x1", labels={"initial": "yes"}))
        await call(http, "POST", cm_path(ns), body=configmap("x2", labels={"initial": "yes"}))
        # (a real cluster puts kube-root-ca.crt in every namespace: select only ours)
        events = await read_watch(http, cm_path(ns), {"timeoutSeconds": "1", "labelSelector": "initial=yes"},
                                  until=2)
    assert {e["type"] for e in events} == {"ADDED"}
    assert {e["object"]["metadata"]["name"] for e in events} == {"x1", "x2"}


async def test_live_events_reach_every_watcher(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        _, listed = await call(http, "GET", cm_path(ns))
        rv = listed["metadata"]["resourceVersion"]
        watchers = [asyncio.create_task(read_watch(http, cm_path(ns), {"resourceVersion": rv,
                                                                        "timeoutSeconds": "5"}, until=2))
                    for _ in range(5)]
        await asyncio.sleep(0.3)
        await call(http, "POST", cm_path(ns), body=configmap("live"))
        await call(http, "DELETE", cm_path(ns, "live"))
        results = await asyncio.gather(*watchers)
    for events in results:
        assert [e["type"] for e in events] == ["ADDED", "DELETED"]


async def _write_during(http, ns: str, name: str, *, after: float = 0.5) -> None:
    await asyncio.sleep(after)
    status, body = await call(http, "POST", cm_path(ns), body=configmap(name))
    assert status == 201, body


async def test_bookmark_arrives_before_timeout_and_stream_ends(cluster):
    """A real watch cache (kube-apiserver v1.36.3) bookmarks what it has seen of the resource: a write the
    watch does not match (here: outside its label selector) still moves it, and the bookmark before the
    timeout reports it."""
    ns = cluster.namespace
    async with cluster.session() as http:
        _, listed = await call(http, "GET", cm_path(ns))
        rv = listed["metadata"]["resourceVersion"]
        loop = asyncio.get_running_loop()
        started = loop.time()
        write = asyncio.create_task(_write_during(http, ns, "unwatched"))
        events = await read_watch(http, cm_path(ns), {"resourceVersion": rv, "timeoutSeconds": "4",
                                                       "allowWatchBookmarks": "true", "labelSelector": "watched=yes"})
        elapsed = loop.time() - started
        await write
    assert [e["type"] for e in events if e["type"] != "BOOKMARK"] == []
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks, events
    assert bookmarks[-1]["object"]["kind"] == "ConfigMap"
    assert int(bookmarks[-1]["object"]["metadata"]["resourceVersion"]) > int(rv)
    assert elapsed < 30  # the server ended the stream itself


async def test_no_bookmark_when_nothing_was_written_since_the_watch_began(cluster):
    """kube-apiserver v1.36.3 sends no bookmark to a watch of a resource nobody wrote since it began."""
    if cluster.server is None:
        pytest.skip("a real cluster's own controllers may write ConfigMaps meanwhile")
    ns = cluster.namespace
    async with cluster.session() as http:
        _, listed = await call(http, "GET", cm_path(ns))
        events = await read_watch(http, cm_path(ns), {"resourceVersion": listed["metadata"]["resourceVersion"],
                                                       "timeoutSeconds": "3", "allowWatchBookmarks": "true"})
    assert events == []


async def test_resume_from_bookmark_loses_nothing(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        _, listed = await call(http, "GET", cm_path(ns))
        # a real server sends its bookmark about 2 s before the timeout (a 2 s watch may end without one), and
        # only when the resource moved since the watch began
        write = asyncio.create_task(_write_during(http, ns, "before-bookmark"))
        events = await read_watch(http, cm_path(ns), {"resourceVersion": listed["metadata"]["resourceVersion"],
                                                       "timeoutSeconds": "4", "allowWatchBookmarks": "true"})
        await write
        assert [e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED"] == ["before-bookmark"]
        bookmark_rv = [e for e in events if e["type"] == "BOOKMARK"][-1]["object"]["metadata"]["resourceVersion"]
        await call(http, "POST", cm_path(ns), body=configmap("after-bookmark"))
        resumed = await read_watch(http, cm_path(ns), {"resourceVersion": bookmark_rv, "timeoutSeconds": "2"},
                                   until=1)
    assert resumed[0]["type"] == "ADDED"
    assert resumed[0]["object"]["metadata"]["name"] == "after-bookmark"


async def test_label_selector_turns_unmatching_into_deleted(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        _, listed = await call(http, "GET", cm_path(ns))
        rv = listed["metadata"]["resourceVersion"]
        await call(http, "POST", cm_path(ns), body=configmap("sel", labels={"watch": "me"}))
        await call(http, "POST", cm_path(ns), body=configmap("other", labels={"watch": "not"}))
        await call(http, "PATCH", cm_path(ns, "sel"), body={"metadata": {"labels": {"watch": "no"}}},
                   content_type=MERGE)
        await call(http, "PATCH", cm_path(ns, "sel"), body={"metadata": {"labels": {"watch": "me"}}},
                   content_type=MERGE)
        events = await read_watch(http, cm_path(ns), {"resourceVersion": rv, "timeoutSeconds": "2",
                                                       "labelSelector": "watch=me"}, until=3)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "sel"), ("DELETED", "sel"), ("ADDED", "sel")]


async def test_too_old_resource_version_gets_410_error_event(cluster):
    server = cluster.require_server()
    ns = cluster.namespace
    async with cluster.session() as http:
        _, obj = await call(http, "POST", cm_path(ns), body=configmap("old"))
        old_rv = obj["metadata"]["resourceVersion"]
        await call(http, "PATCH", cm_path(ns, "old"), body={"data": {"a": "b"}}, content_type=MERGE)
        server.compact()
        events = await read_watch(http, cm_path(ns), {"resourceVersion": old_rv, "timeoutSeconds": "5"})
    assert len(events) == 1
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert status["message"].startswith(f"too old resource version: {old_rv} (")


async def test_single_object_watch_path_sees_only_that_object(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        _, listed = await call(http, "GET", cm_path(ns))
        rv = listed["metadata"]["resourceVersion"]
        await call(http, "POST", cm_path(ns), body=configmap("other"))
        await call(http, "POST", cm_path(ns), body=configmap("mine"))
        events = await read_watch(http, f"/api/v1/watch/namespaces/{ns}/configmaps/mine",
                                  {"resourceVersion": rv, "timeoutSeconds": "1"})
        # on the object's own path, watch=true is ignored: the answer is the object itself
        status, plain = await call(http, "GET", cm_path(ns, "mine"), params={"watch": "true"})
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "mine")]
    assert (status, plain["kind"], plain["metadata"]["name"]) == (200, "ConfigMap", "mine")
