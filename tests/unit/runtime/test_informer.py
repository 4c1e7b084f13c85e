import asyncio
import json
import random
from typing import Any

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.transport import HttpRequest, MockResponse, MockTransport
from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.runtime.informer import DeletedFinalStateUnknown, FuncHandler, Informer
from tests.unit.loop import complete, settle
from tests.unit.runtime.fakeapi import FakeApi


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}, "data": data}


def line(etype: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": etype, "object": obj}).encode() + b"\n"


class ScriptedApi(FakeApi):
    """FakeApi whose watch requests replay scripted streams (then hang)."""

    def __init__(self) -> None:
        super().__init__()
        self.streams: list[list[bytes | BaseException | None]] = []
        self.transport = MockTransport(self.route)

    def route(self, req: HttpRequest) -> MockResponse:
        if req.query().get("watch") == "true":
            return MockResponse(stream_lines=self.streams.pop(0) if self.streams else [None])
        return self.handle(req)

    def lists(self) -> list[HttpRequest]:
        return [
            r
            for r in self.transport.requests
            if r.method == "GET" and r.url.endswith("/configmaps") and "watch" not in r.query()
        ]

    def watches(self) -> list[HttpRequest]:
        return [r for r in self.transport.requests if r.query().get("watch") == "true"]


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def handler(self) -> FuncHandler:
        return FuncHandler(
            add=lambda o, initial: self.events.append(("add" + ("-initial" if initial else ""), o["metadata"]["name"])),
            update=lambda old, new: self.events.append(("update", new["metadata"]["name"])),
            delete=lambda o: self.events.append(
                ("tombstone", o.obj["metadata"]["name"])
                if isinstance(o, DeletedFinalStateUnknown)
                else ("delete", o["metadata"]["name"])
            ),
        )


def make(api: ScriptedApi, clock: FakeClock, **kwargs: Any) -> Informer:
    client = KubeClient.for_server("http://fake", transport=api.transport)
    return Informer(
        client=client, api_version="v1", kind="ConfigMap", namespace="ns", clock=clock, rng=random.Random(0), **kwargs
    )


async def test_list_then_watch_events_then_rewatch_without_relist() -> None:
    api, clock = ScriptedApi(), FakeClock()
    client = api.client()
    a = await client.create(cm("a"))
    rv = api.rv
    b2 = {**cm("b"), "metadata": {"name": "b", "namespace": "ns", "resourceVersion": str(rv + 2)}}
    a2 = {**a, "metadata": {**a["metadata"], "resourceVersion": str(rv + 3)}}
    a3 = {**a, "metadata": {**a["metadata"], "resourceVersion": str(rv + 4)}}
    bookmark = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv + 9)}}
    api.streams = [[line("ADDED", b2), line("MODIFIED", a2), line("DELETED", a3), line("BOOKMARK", bookmark)]]
    inf = make(api, clock)
    rec = Recorder()
    inf.add_handler(rec.handler())
    task = asyncio.create_task(inf.run())
    await complete(inf.wait_for_sync())
    await settle()
    assert rec.events == [("add-initial", "a"), ("add", "b"), ("update", "a"), ("delete", "a")]
    assert sorted(inf.store.keys()) == ["ns/b"]
    # the stream ended normally: the next watch resumes from the bookmark, and nothing was relisted
    assert len(api.lists()) == 1
    watches = api.watches()
    assert [w.query()["resourceVersion"] for w in watches] == [str(rv), str(rv + 9)]
    assert all(300 <= int(w.query()["timeoutSeconds"]) <= 600 for w in watches)
    assert all(w.query()["allowWatchBookmarks"] == "true" for w in watches)
    task.cancel()


async def test_gone_relists_and_reports_objects_deleted_meanwhile() -> None:
    api, clock = ScriptedApi(), FakeClock()
    client = api.client()
    for name in ("keep", "change", "vanish"):
        await client.create(cm(name))
    gone = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}
    api.streams = [[line("ERROR", gone)]]
    inf = make(api, clock, page_size=2)
    rec = Recorder()
    inf.add_handler(rec.handler())
    task = asyncio.create_task(inf.run())
    await complete(inf.wait_for_sync())
    await settle()
    # while disconnected: one object deleted, one changed, one created
    await client.delete("v1", "ConfigMap", "vanish", "ns")
    await client.update({**(await client.get("v1", "ConfigMap", "change", "ns")), "data": {"x": "1"}})
    await client.create(cm("new"))
    rec.events.clear()
    await clock.advance(2)  # the reflector backoff (0.8–1.6 s)
    await settle()
    assert sorted(rec.events) == [("add", "new"), ("tombstone", "vanish"), ("update", "change")]
    assert sorted(inf.store.keys()) == ["ns/change", "ns/keep", "ns/new"]
    assert inf.stats.relists_after_gone == 1
    assert len(api.lists()) == 4  # two pages, twice
    task.cancel()


async def test_very_short_empty_watch_counts_as_error_and_relists() -> None:
    api, clock = ScriptedApi(), FakeClock()
    api.streams = [[]]
    inf = make(api, clock)
    task = asyncio.create_task(inf.run())
    await complete(inf.wait_for_sync())
    await settle()
    assert inf.stats.errors == 1 and "under 1s" in inf.stats.last_error
    await clock.advance(2)
    await settle()
    assert len(api.lists()) == 2
    task.cancel()


async def test_transport_error_rewatches_after_backoff_without_relist() -> None:
    from kustomize_controller.kube.errors import TransportError

    api, clock = ScriptedApi(), FakeClock()
    await api.client().create(cm("a"))
    api.streams = [[TransportError("connection reset")]]
    inf = make(api, clock)
    task = asyncio.create_task(inf.run())
    await complete(inf.wait_for_sync())
    await settle()
    await clock.advance(2)
    await settle()
    assert len(api.watches()) == 2 and len(api.lists()) == 1
    task.cancel()


async def test_late_handler_gets_replay_and_failing_handler_is_isolated() -> None:
    api, clock = ScriptedApi(), FakeClock()
    await api.client().create(cm("a"))
    inf = make(api, clock)

    def boom(obj: dict, initial: bool) -> None:
        raise RuntimeError("handler bug")

    inf.add_handler(FuncHandler(add=boom))
    task = asyncio.create_task(inf.run())
    await complete(inf.wait_for_sync())
    rec = Recorder()
    inf.add_handler(rec.handler())
    assert rec.events == [("add-initial", "a")]
    assert inf.has_synced()
    task.cancel()


async def test_metadata_only_and_label_selector_are_sent() -> None:
    api, clock = ScriptedApi(), FakeClock()
    await api.client().create(cm("a", secret="s"))
    inf = make(api, clock, metadata_only=True, label_selector="shard=1")
    task = asyncio.create_task(inf.run())
    await complete(inf.wait_for_sync())
    await settle()
    assert "data" not in inf.store.get("ns/a")  # type: ignore[operator]
    for req in api.lists() + api.watches():
        assert req.query()["labelSelector"] == "shard=1"
        assert "PartialObjectMetadata" in (req.header("Accept") or "")
    task.cancel()


async def test_resync_redelivers_cached_objects() -> None:
    api, clock = ScriptedApi(), FakeClock()
    await api.client().create(cm("a"))
    inf = make(api, clock, resync_period=60)
    rec = Recorder()
    inf.add_handler(rec.handler())
    task = asyncio.create_task(inf.run())
    await complete(inf.wait_for_sync())
    await settle()
    await clock.advance(60)
    assert rec.events == [("add-initial", "a"), ("update", "a")]
    task.cancel()


async def test_cache_sync_timeout_names_the_unsynced_informer() -> None:
    import pytest

    from kustomize_controller.runtime.informer import wait_for_cache_sync

    api, clock = ScriptedApi(), FakeClock()
    api.down.add("configmaps")
    inf = make(api, clock)
    task = asyncio.create_task(inf.run())
    waiter = asyncio.create_task(wait_for_cache_sync([inf], clock=clock, sync_timeout=120))
    await settle()
    await clock.advance(119)
    assert not waiter.done()
    await clock.advance(2)
    with pytest.raises(TimeoutError, match=r"120s waiting for caches to sync: ConfigMap\.v1/ns"):
        await waiter
    assert inf.stats.errors >= 1 and not inf.has_synced()
    task.cancel()


async def test_cached_objects_carry_no_managed_fields() -> None:
    api, clock = ScriptedApi(), FakeClock()
    client = api.client()
    fields = [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:data": {}}}]
    listed = cm("a", k="v")
    listed["metadata"]["managedFields"] = fields
    await client.create(listed)
    watched = cm("b")
    watched["metadata"].update(resourceVersion=str(api.rv + 1), managedFields=fields)
    api.streams = [[line("ADDED", watched)]]
    inf = make(api, clock)
    rec = Recorder()
    inf.add_handler(rec.handler())
    task = asyncio.create_task(inf.run())
    await complete(inf.wait_for_sync())
    await settle()
    assert rec.events == [("add-initial", "a"), ("add", "b")]
    for key in ("ns/a", "ns/b"):
        obj = inf.get(key)
        assert obj is not None and "managedFields" not in obj["metadata"]
    a = inf.get("ns/a")
    assert a is not None and a["data"] == {"k": "v"} and a["metadata"]["name"] == "a"
    task.cancel()


def test_cached_objects_share_their_key_strings_and_lose_managed_fields() -> None:
    import json

    from kustomize_controller.runtime.informer import _strip

    text = json.dumps({"metadata": {"name": "a", "managedFields": [{"manager": "x"}]},
                       "status": {"conditions": [{"lastTransitionTime": "t", "type": "Ready"}]}})
    a, b = _strip(json.loads(text)), _strip(json.loads(text))
    assert a == b == {"metadata": {"name": "a"},
                      "status": {"conditions": [{"lastTransitionTime": "t", "type": "Ready"}]}}
    key_a = next(k for k in a["status"]["conditions"][0] if k == "lastTransitionTime")
    key_b = next(k for k in b["status"]["conditions"][0] if k == "lastTransitionTime")
    assert key_a is key_b  # one string for every cached object, not one per decode


def _drop_data(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != "data"}


async def test_transform_projects_what_is_cached_and_handlers_see_and_keeps_resource_versions() -> None:
    api, clock = ScriptedApi(), FakeClock()
    client = api.client()
    await client.create(cm("a", big="x" * 100))
    rv = api.rv
    b = {**cm("b", big="y"), "metadata": {"name": "b", "namespace": "ns", "resourceVersion": str(rv + 2)}}
    bookmark = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv + 5)}}
    api.streams = [[line("ADDED", b), line("BOOKMARK", bookmark)]]
    inf = make(api, clock, transform=_drop_data)
    seen: list[dict[str, Any]] = []
    inf.add_handler(FuncHandler(add=lambda obj, initial: seen.append(obj)))
    task = asyncio.create_task(inf.run())
    await complete(inf.wait_for_sync())
    await settle()
    assert [o["metadata"]["name"] for o in seen] == ["a", "b"]
    assert all("data" not in o for o in seen)
    for key in ("ns/a", "ns/b"):
        cached = inf.get(key)
        assert cached is not None and "data" not in cached and cached["metadata"]["resourceVersion"]
    # the watch resumes from the last resourceVersion as without a transform
    assert [w.query()["resourceVersion"] for w in api.watches()] == [str(rv), str(rv + 5)]
    task.cancel()


def test_cached_objects_share_short_string_values_not_long_ones() -> None:
    from kustomize_controller.runtime.informer import SHARED_VALUE_MAX, _strip

    long = "main@sha1:" + "a" * 40
    assert len(long) > SHARED_VALUE_MAX
    text = json.dumps({"status": {"conditions": [{"status": "True", "reason": "ReconciliationSucceeded"}],
                                  "lastAppliedRevision": long}, "spec": {"items": ["v1", 3, None]}})
    a, b = _strip(json.loads(text)), _strip(json.loads(text))
    assert a == b == json.loads(text)
    ca, cb = a["status"]["conditions"][0], b["status"]["conditions"][0]
    assert ca["status"] is cb["status"] and ca["reason"] is cb["reason"]
    assert a["spec"]["items"][0] is b["spec"]["items"][0]
    assert a["status"]["lastAppliedRevision"] is not b["status"]["lastAppliedRevision"]
