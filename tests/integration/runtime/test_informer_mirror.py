"""An informer keeps an exact mirror of the server through forced watch closes, a compacted history
(410) and objects deleted while it was disconnected; its handlers see every change, including deletes
of objects that vanished meanwhile (as tombstones)."""

import asyncio
import random
from typing import Any

import pytest

from kustomize_controller.runtime.clock import RealClock
from kustomize_controller.runtime.informer import DeletedFinalStateUnknown, FuncHandler, Informer
from tests.integration.runtime.helpers import configmap, eventually, make_client

pytestmark = pytest.mark.integration


class HandlerMirror:
    """What a consumer rebuilds from the handler calls alone."""

    def __init__(self) -> None:
        self.objects: dict[str, str] = {}
        self.tombstones: list[str] = []

    def handler(self) -> FuncHandler:
        def put(obj: dict[str, Any]) -> None:
            meta = obj["metadata"]
            self.objects[f"{meta['namespace']}/{meta['name']}"] = meta["resourceVersion"]

        def delete(obj: dict[str, Any] | DeletedFinalStateUnknown) -> None:
            if isinstance(obj, DeletedFinalStateUnknown):
                self.tombstones.append(obj.key)
                obj = obj.obj
            meta = obj["metadata"]
            self.objects.pop(f"{meta['namespace']}/{meta['name']}", None)

        return FuncHandler(add=lambda o, _i: put(o), update=lambda _o, n: put(n), delete=delete)


async def server_state(client: Any, ns: str) -> dict[str, str]:
    # read through the all-namespaces path: the faults below only break the informer's namespaced path
    items = await client.list("v1", "ConfigMap", field_selector=f"metadata.namespace={ns}")
    return {
        f"{ns}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
        for o in items
        if o["metadata"]["namespace"] == ns
    }


async def test_mirror_survives_closes_compaction_and_offline_deletes(cluster) -> None:
    server = cluster.require_server()
    ns = cluster.namespace
    rng = random.Random(7)
    async with await make_client(cluster) as client:
        informer = Informer(
            client=client, api_version="v1", kind="ConfigMap", namespace=ns, clock=RealClock(), page_size=4
        )
        mirror = HandlerMirror()
        informer.add_handler(mirror.handler())
        for i in range(10):
            await client.create(configmap(f"cm{i}", ns, v="0"))
        async with asyncio.TaskGroup() as tg:
            task = tg.create_task(informer.run())
            await asyncio.wait_for(informer.wait_for_sync(), 30)

            async def in_sync() -> bool:
                want = await server_state(client, ns)
                store = {f"{ns}/{o['metadata']['name']}": o["metadata"]["resourceVersion"] for o in informer.list()}
                return store == want and mirror.objects == want

            # 1. churn with forced watch closes in between
            for round_ in range(5):
                for _ in range(8):
                    name = f"cm{rng.randrange(14)}"
                    try:
                        if rng.random() < 0.25:
                            await client.delete("v1", "ConfigMap", name, ns)
                        else:
                            await client.apply(configmap(name, ns, v=str(round_)), field_manager="test")
                    except Exception:
                        pass  # deleting something absent is fine for this churn
                assert server.close_watches() >= 0
            await eventually(in_sync, what="mirror after watch closes")

            # 2. disconnected: lists and watches fail, objects change and vanish, history is compacted
            rule = server.faults.fail(method="GET", path=f"/namespaces/{ns}/configmaps$", status=503, count=None)
            server.close_watches()
            await asyncio.sleep(0.2)
            present = sorted(await server_state(client, ns))
            gone = present[:3]
            for key in gone:
                await client.delete("v1", "ConfigMap", key.split("/")[1], ns)
            await client.apply(configmap("offline-new", ns), field_manager="test")
            await client.apply(configmap(present[4].split("/")[1], ns, v="offline"), field_manager="test")
            server.compact()
            rule.remaining = 0
            await eventually(in_sync, what="mirror after reconnect")
            assert set(gone) <= set(mirror.tombstones), "vanished objects must reach handlers as deletes"

            # 3. a watch resuming from a compacted resourceVersion gets 410 and relists (the re-watch
            #    is held back by a delay so the history is compacted before the server reads it)
            relists = informer.stats.relists_after_gone
            await asyncio.sleep(1.2)  # a watch closed within 1 s of opening with no event counts as an error
            server.faults.delay(1.0, method="GET", path=f"/namespaces/{ns}/configmaps$", count=1)
            server.close_watches()
            await asyncio.sleep(0.2)
            await client.apply(configmap("after-compaction", ns), field_manager="test")
            server.compact()
            await eventually(in_sync, what="mirror after 410")
            assert informer.stats.relists_after_gone == relists + 1
            task.cancel()


async def test_metadata_only_informer_scoped_by_label(cluster) -> None:
    ns = cluster.namespace
    async with await make_client(cluster) as client:
        for name, labels in (("in", {"shard": "a"}), ("out", {"shard": "b"})):
            await client.create(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "type": "Opaque",
                    "metadata": {"name": name, "namespace": ns, "labels": labels},
                    "stringData": {"password": "hunter2"},
                }
            )
        informer = Informer(
            client=client,
            api_version="v1",
            kind="Secret",
            namespace=ns,
            clock=RealClock(),
            label_selector="shard=a",
            metadata_only=True,
        )
        async with asyncio.TaskGroup() as tg:
            task = tg.create_task(informer.run())
            await asyncio.wait_for(informer.wait_for_sync(), 30)
            assert [o["metadata"]["name"] for o in informer.list()] == ["in"]
            obj = informer.get(f"{ns}/in")
            assert obj is not None and set(obj) == {"apiVersion", "kind", "metadata"}
            # relabelling moves an object in and out of scope
            out = await client.get("v1", "Secret", "out", ns)
            out["metadata"]["labels"] = {"shard": "a"}
            await client.update(out)
            await eventually(lambda: informer.get(f"{ns}/out") is not None, what="relabelled object enters scope")
            assert set(informer.get(f"{ns}/out") or {}) == {"apiVersion", "kind", "metadata"}
            inside = await client.get("v1", "Secret", "in", ns)
            inside["metadata"]["labels"] = {"shard": "c"}
            await client.update(inside)
            await eventually(lambda: informer.get(f"{ns}/in") is None, what="relabelled object leaves scope")
            task.cancel()
