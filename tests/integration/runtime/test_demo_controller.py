"""A small controller built only from runtime pieces (informer, workqueue, controller, events,
manager, probes, metrics) and no Kustomization code: it mirrors each labelled ConfigMap's data keys
into an annotation of that ConfigMap."""

import asyncio
import re

import aiohttp
import pytest

from kustomize_controller.runtime.clock import RealClock
from kustomize_controller.runtime.manager import Manager, ManagerOptions
from tests.integration.runtime.helpers import KEYS_ANNOTATION, configmap, eventually, make_client, mirror_controller

pytestmark = pytest.mark.integration


async def annotation(client, ns: str, name: str) -> str | None:
    obj = await client.get("v1", "ConfigMap", name, ns)
    return (obj["metadata"].get("annotations") or {}).get(KEYS_ANNOTATION)


async def http_get(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as http, http.get(url, timeout=aiohttp.ClientTimeout(total=10)) as resp:
        return resp.status, await resp.text(), resp.headers.get("Content-Type", "")


async def test_demo_controller_mirrors_keys_records_events_and_serves_probes(cluster) -> None:
    ns = cluster.namespace
    clock = RealClock()
    async with await make_client(cluster) as client:
        manager = Manager(
            client=client,
            clock=clock,
            options=ManagerOptions(metrics_addr="127.0.0.1:0", health_addr="127.0.0.1:0"),
        )
        recorder = manager.event_recorder(reporting_controller="demo-controller", reporting_instance="demo-0")
        mirror_controller(manager, client=client, clock=clock, recorder=recorder)
        await client.create(configmap("one", ns, b="2", a="1"))
        unlabelled = configmap("ignored", ns, x="1")
        unlabelled["metadata"]["labels"] = {}
        await client.create(unlabelled)
        run = asyncio.create_task(manager.run(handle_signals=False))
        await asyncio.wait_for(manager.wait_started(), 10)

        await eventually(lambda: _eq(client, ns, "one", "a,b"), what="keys of 'one' mirrored")
        await client.create(configmap("two", ns, z="1"))
        await eventually(lambda: _eq(client, ns, "two", "z"), what="a ConfigMap created later is reconciled")
        obj = await client.get("v1", "ConfigMap", "one", ns)
        obj["data"]["c"] = "3"
        await client.update(obj)
        await eventually(lambda: _eq(client, ns, "one", "a,b,c"), what="an update is reconciled")
        assert await annotation(client, ns, "ignored") is None, "label-selector scoping"

        # events: one Event per object and message, repeats aggregated into count
        async def aggregated() -> bool:
            events = [e for e in await client.list("v1", "Event", ns) if e["reason"] == "Mirrored"]
            by_object = {}
            for e in events:
                by_object.setdefault((e["involvedObject"]["name"], e["message"]), []).append(e)
            return all(len(v) == 1 for v in by_object.values()) and any(v[0]["count"] >= 2 for v in by_object.values())

        await eventually(aggregated, what="Events aggregated")
        event = next(e for e in await client.list("v1", "Event", ns) if e["involvedObject"]["name"] == "two")
        assert event["type"] == "Normal" and event["message"] == "keys: z"
        assert event["reportingComponent"] == "demo-controller" and event["reportingInstance"] == "demo-0"
        assert event["involvedObject"]["kind"] == "ConfigMap" and event["involvedObject"]["uid"]

        # probes and metrics
        assert await http_get(f"{manager.health_url}/healthz") == (200, "ok", "text/plain; charset=utf-8")
        status, body, _ = await http_get(f"{manager.health_url}/readyz?verbose")
        assert status == 200
        assert body == "[+]informers ok\n[+]ping ok\nhealthz check passed\n"
        assert (await http_get(f"{manager.health_url}/readyz/informers"))[:2] == (200, "ok")
        assert (await http_get(f"{manager.health_url}/healthz/nope"))[0] == 404
        status, text, ctype = await http_get(f"{manager.metrics_url}/metrics")
        assert status == 200 and ctype.startswith("text/plain")
        assert "_created" not in text
        for result in ("success", "error", "requeue", "requeue_after"):
            assert f'controller_runtime_reconcile_total{{controller="configmap-mirror",result="{result}"}}' in text
        assert re.search(
            r'controller_runtime_reconcile_total\{controller="configmap-mirror",result="requeue_after"\} [1-9]', text
        )
        assert 'controller_runtime_reconcile_time_seconds_bucket{controller="configmap-mirror",le="0.005"}' in text
        assert 'controller_runtime_max_concurrent_reconciles{controller="configmap-mirror"} 2.0' in text
        assert 'workqueue_depth{controller="configmap-mirror",name="configmap-mirror",priority=""}' in text
        assert 'workqueue_adds_total{controller="configmap-mirror",name="configmap-mirror"}' in text
        assert (
            'workqueue_queue_duration_seconds_bucket{controller="configmap-mirror",le="1e-08",name="configmap-mirror"}'
            in text
        )
        assert 'workqueue_retries_total{controller="configmap-mirror",name="configmap-mirror"}' in text
        assert (
            'workqueue_longest_running_processor_seconds{controller="configmap-mirror",name="configmap-mirror"}' in text
        )
        assert re.search(r'rest_client_requests_total\{code="200",host="127\.0\.0\.1:\d+",method="GET"\}', text)
        assert re.search(r'rest_client_requests_total\{code="201",host="127\.0\.0\.1:\d+",method="POST"\}', text)
        assert "process_cpu_seconds_total" in text

        manager.stop()
        assert await asyncio.wait_for(run, 30) == 0


async def _eq(client, ns: str, name: str, want: str) -> bool:
    return await annotation(client, ns, name) == want


async def test_readyz_reports_unsynced_informers(cluster) -> None:
    server = cluster.require_server()
    ns = cluster.namespace
    server.faults.fail(method="GET", path=f"/namespaces/{ns}/configmaps$", status=503, count=None)
    async with await make_client(cluster) as client:
        manager = Manager(
            client=client,
            clock=RealClock(),
            options=ManagerOptions(metrics_addr="0", health_addr="127.0.0.1:0"),
        )
        manager.informer("v1", "ConfigMap", namespace=ns)
        run = asyncio.create_task(manager.run(handle_signals=False))
        await asyncio.wait_for(manager.wait_started(), 10)
        assert manager.metrics_url is None
        status, body, _ = await http_get(f"{manager.health_url}/readyz")
        assert status == 500
        assert body == "[-]informers failed: reason withheld\n[+]ping ok\nhealthz check failed\n"
        status, body, _ = await http_get(f"{manager.health_url}/readyz?exclude=informers")
        assert (status, body) == (200, "ok")
        assert (await http_get(f"{manager.health_url}/healthz"))[:2] == (200, "ok")
        server.faults.clear()

        async def ready() -> bool:
            return (await http_get(f"{manager.health_url}/readyz"))[:2] == (200, "ok")

        await eventually(ready, what="ready after the informer synced")
        manager.stop()
        assert await asyncio.wait_for(run, 30) == 0


async def test_sigterm_stops_gracefully_with_status_0(cluster) -> None:
    import os
    import signal

    async with await make_client(cluster) as client:
        clock = RealClock()
        manager = Manager(client=client, clock=clock, options=ManagerOptions(metrics_addr="0", health_addr="0"))
        reconciler = mirror_controller(manager, client=client, clock=clock, hold=3600)
        await client.create(configmap("slow", cluster.namespace, k="v"))
        run = asyncio.create_task(manager.run(handle_signals=True))
        assert reconciler.controller is not None
        await eventually(lambda: reconciler.controller.busy, what="a reconcile in flight (it holds an hour)")
        os.kill(os.getpid(), signal.SIGTERM)
        # the in-flight reconcile is cancelled at once (upstream cancels its context); the 30 s grace
        # period is not waited out
        assert await asyncio.wait_for(run, 20) == 0
        assert reconciler.log and reconciler.log[0][3] - reconciler.log[0][2] < 3600
        live = await client.get("v1", "ConfigMap", "slow", cluster.namespace)
        assert KEYS_ANNOTATION not in (live["metadata"].get("annotations") or {})  # it never got that far
