"""Faults aimed at one client (``server.client_faults``, embedded server only): a crash right after its k-th
write, a watch event not delivered, a watch cache lagging behind; other users are never affected."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from tests.conftest import ClusterHandle
from tests.integration.apiserver.helpers import call, cm_path, configmap, read_watch

pytestmark = pytest.mark.integration


def as_user(cluster: ClusterHandle, user: str) -> aiohttp.ClientSession:
    token = cluster.require_server().add_user(user, groups=("system:masters",))
    return cluster.session(headers={"Authorization": f"Bearer {token}"})


async def names(cluster: ClusterHandle) -> list[str]:
    async with cluster.session() as http:
        _, listed = await call(http, "GET", cm_path(cluster.namespace))
    return [item["metadata"]["name"] for item in listed["items"]]


async def test_crash_after_the_kth_write_stores_it_then_drops_everything(cluster: ClusterHandle) -> None:
    server = cluster.require_server()
    ns = cluster.namespace
    crashes: list[str] = []
    server.client_faults.crash_after("ctl", writes=2, on_crash=lambda: crashes.append("ctl"))
    async with as_user(cluster, "ctl") as http:
        assert (await call(http, "POST", cm_path(ns), body=configmap("one")))[0] == 201
        with pytest.raises(aiohttp.ClientError):  # stored, but the answer never comes
            await call(http, "POST", cm_path(ns), body=configmap("two"))
        assert crashes == ["ctl"]
        with pytest.raises(aiohttp.ClientError):  # a dead process sends nothing that is served
            await call(http, "POST", cm_path(ns), body=configmap("three"))
    assert await names(cluster) == ["one", "two"]
    assert server.client_faults.stats("ctl").writes == 2
    assert server.client_faults.stats("ctl").cut_requests >= 1
    async with cluster.session() as http:  # other users are served as before
        assert (await call(http, "POST", cm_path(ns), body=configmap("four")))[0] == 201


async def test_a_crash_cuts_the_users_open_watch(cluster: ClusterHandle) -> None:
    server = cluster.require_server()
    ns = cluster.namespace
    server.client_faults.crash_after("ctl", writes=1)
    async with as_user(cluster, "ctl") as http:
        watch = asyncio.create_task(read_watch(http, cm_path(ns), {"timeoutSeconds": "30"}))
        for _ in range(100):
            if server.watcher_count():
                break
            await asyncio.sleep(0.02)
        with pytest.raises(aiohttp.ClientError):
            await call(http, "POST", cm_path(ns), body=configmap("one"))
        with pytest.raises(aiohttp.ClientError):  # cut, not ended cleanly
            await asyncio.wait_for(watch, 10)


@pytest.mark.parametrize("then", ["close", "expire"])
async def test_a_dropped_event_ends_the_stream_there(cluster: ClusterHandle, then: Any) -> None:
    server = cluster.require_server()
    ns = cluster.namespace
    server.client_faults.drop_event("ctl", index=2, then=then)
    async with cluster.session() as admin:
        _, first = await call(admin, "POST", cm_path(ns), body=configmap("a"))
        await call(admin, "POST", cm_path(ns), body=configmap("b"))
        await call(admin, "POST", cm_path(ns), body=configmap("c"))
    rv = str(int(first["metadata"]["resourceVersion"]) - 1)
    async with as_user(cluster, "ctl") as http:
        events = await read_watch(http, cm_path(ns), {"timeoutSeconds": "10", "resourceVersion": rv})
    assert [e["object"]["metadata"].get("name") for e in events if e["type"] == "ADDED"] == ["a"]
    if then == "expire":
        assert events[-1]["type"] == "ERROR" and events[-1]["object"]["code"] == 410
    else:
        assert [e["type"] for e in events] == ["ADDED"]
    assert server.client_faults.stats("ctl").dropped == 1


async def test_a_lagging_cache_delays_events_and_answers_rv0_reads_from_the_past(cluster: ClusterHandle) -> None:
    server = cluster.require_server()
    ns = cluster.namespace
    server.client_faults.lag("ctl", writes=2, seconds=30.0, resources=frozenset({"configmaps"}))
    async with cluster.session() as admin, as_user(cluster, "ctl") as http:
        _, a = await call(admin, "POST", cm_path(ns), body=configmap("a", {"v": "1"}))
        watch = asyncio.create_task(read_watch(http, cm_path(ns), {
            "timeoutSeconds": "20", "resourceVersion": str(int(a["metadata"]["resourceVersion"]) - 1)}, until=1))
        await asyncio.sleep(0.3)
        assert not watch.done()  # held: the cache is one write short of showing it
        await call(admin, "PUT", cm_path(ns, "a"), body={**a, "data": {"v": "2"}})
        await call(admin, "POST", cm_path(ns), body=configmap("b"))
        events = await asyncio.wait_for(watch, 10)
        assert [(e["type"], e["object"]["data"]) for e in events] == [("ADDED", {"v": "1"})]

        _, stale = await call(http, "GET", cm_path(ns), params={"resourceVersion": "0"})
        assert [(i["metadata"]["name"], i["data"]) for i in stale["items"]] == [("a", {"v": "1"})]
        _, old = await call(http, "GET", cm_path(ns, "a"), params={"resourceVersion": "0"})
        assert old["data"] == {"v": "1"} and old["kind"] == "ConfigMap"
        _, current = await call(http, "GET", cm_path(ns))  # a consistent read is current
        assert [i["metadata"]["name"] for i in current["items"]] == ["a", "b"]
        _, fresh = await call(admin, "GET", cm_path(ns), params={"resourceVersion": "0"})  # other users
        assert len(fresh["items"]) == 2
        await call(admin, "POST", f"/api/v1/namespaces/{ns}/secrets",
                   body={"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}})
        _, secrets = await call(http, "GET", f"/api/v1/namespaces/{ns}/secrets", params={"resourceVersion": "0"})
        assert [i["metadata"]["name"] for i in secrets["items"]] == ["s"]  # another resource's cache: current
    assert server.client_faults.stats("ctl").stale_reads == 2
    assert server.client_faults.stats("ctl").held >= 1


async def test_a_lagging_cache_starts_a_rv0_watch_in_the_past(cluster: ClusterHandle) -> None:
    server = cluster.require_server()
    ns = cluster.namespace
    server.client_faults.lag("ctl", writes=1, seconds=0.5)
    async with cluster.session() as admin, as_user(cluster, "ctl") as http:
        _, a = await call(admin, "POST", cm_path(ns), body=configmap("a", {"v": "1"}))
        await call(admin, "PUT", cm_path(ns, "a"), body={**a, "data": {"v": "2"}})
        events = await read_watch(http, cm_path(ns), {"timeoutSeconds": "10", "resourceVersion": "0"}, until=2)
    # the initial list one write behind, then that write (held at most 0.5 s: nothing follows it)
    assert [(e["type"], e["object"]["data"]) for e in events] == [("ADDED", {"v": "1"}), ("MODIFIED", {"v": "2"})]
    assert server.client_faults.stats("ctl").stale_reads == 1


async def test_on_write_calls_back_after_the_kth_write_and_cuts_nothing(cluster: ClusterHandle) -> None:
    server = cluster.require_server()
    ns = cluster.namespace
    seen: list[list[str]] = []

    def callback() -> None:
        seen.append(server.object_names("v1", "ConfigMap", ns))

    server.client_faults.on_write("ctl", writes=2, callback=callback)
    async with as_user(cluster, "ctl") as http:
        for name in ("one", "two", "three"):
            assert (await call(http, "POST", cm_path(ns), body=configmap(name)))[0] == 201
    assert seen == [["one", "two"]]  # once, right after the second write was stored


async def test_a_hold_delays_matching_requests_and_a_partition_never_serves_them(cluster: ClusterHandle) -> None:
    server = cluster.require_server()
    ns = cluster.namespace
    faults = server.client_faults
    faults.hold("ctl", path=r"/configmaps", writes_only=True, seconds=0.3)
    faults.hold("ctl", path=r"/secrets")  # a partition: never served
    loop = asyncio.get_running_loop()
    async with as_user(cluster, "ctl") as http:
        assert (await call(http, "GET", cm_path(ns)))[0] == 200  # reads are not held by a writes_only rule
        assert faults.stats("ctl").delayed == 0
        started = loop.time()
        assert (await call(http, "POST", cm_path(ns), body=configmap("slow")))[0] == 201
        assert loop.time() - started >= 0.3  # a lower bound: held, then served
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):  # the client gives up: nothing is stored, now or later
                await call(http, "POST", f"/api/v1/namespaces/{ns}/secrets", body=secret)
        await asyncio.sleep(0.3)
        assert server.object_names("v1", "Secret", ns) == []
        faults.release("ctl")
        assert (await call(http, "POST", f"/api/v1/namespaces/{ns}/secrets", body=secret))[0] == 201
    assert faults.stats("ctl").delayed == 2
    async with cluster.session() as admin:  # other users are never held
        assert (await call(admin, "GET", f"/api/v1/namespaces/{ns}/secrets"))[0] == 200
