"""Benchmark of the embedded API server: ``python -m kustomize_controller.testing.apiserver.bench``.

Measures, over real HTTP on loopback: create throughput up to ``--objects`` ConfigMaps, GET and PATCH latency
with few and with many stored objects (per-operation cost must not grow with the store), a namespace list,
and watch fan-out (``--watchers`` watchers each receiving every event of ``--events`` writes). Request loops
are bounded in count; nothing leaves 127.0.0.1. Prints one line per measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from .server import ApiServer


async def _run_many(count: int, concurrency: int, op: Callable[[int], Awaitable[None]]) -> float:
    queue = iter(range(count))

    async def worker() -> None:
        for i in queue:
            await op(i)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def _create(http: aiohttp.ClientSession, ns: str, name: str) -> None:
    body = {"metadata": {"name": name, "labels": {"bench": "yes"}}, "data": {"k": name}}
    async with http.post(f"/api/v1/namespaces/{ns}/configmaps", json=body) as resp:
        if resp.status != 201:
            raise RuntimeError(await resp.text())


async def _latency(http: aiohttp.ClientSession, ns: str, names: list[str], rounds: int) -> tuple[float, float]:
    sample = [random.choice(names) for _ in range(rounds)]

    async def get(i: int) -> None:
        async with http.get(f"/api/v1/namespaces/{ns}/configmaps/{sample[i]}") as resp:
            await resp.read()

    async def patch(i: int) -> None:
        async with http.patch(f"/api/v1/namespaces/{ns}/configmaps/{sample[i]}",
                              data=json.dumps({"data": {"n": str(i)}}),
                              headers={"Content-Type": "application/merge-patch+json"}) as resp:
            await resp.read()

    get_s = await _run_many(rounds, 1, get)
    patch_s = await _run_many(rounds, 1, patch)
    return get_s / rounds * 1e3, patch_s / rounds * 1e3


async def bench(objects: int, watchers: int, events: int, rounds: int) -> list[str]:
    lines: list[str] = []
    async with ApiServer(history_size=max(10000, events * 2)) as server, server.session() as http:
        for ns in ("bench", "small"):
            async with http.post("/api/v1/namespaces", json={"metadata": {"name": ns}}) as resp:
                resp.raise_for_status()
        small = [f"s{i}" for i in range(100)]
        await _run_many(len(small), 8, lambda i: _create(http, "small", small[i]))
        get_ms, patch_ms = await _latency(http, "small", small, rounds)
        lines.append(f"store=100 objects: GET {get_ms:.2f} ms, PATCH {patch_ms:.2f} ms (sequential)")

        names = [f"cm-{i:05d}" for i in range(objects)]
        elapsed = await _run_many(objects, 16, lambda i: _create(http, "bench", names[i]))
        lines.append(f"create {objects} ConfigMaps: {elapsed:.1f} s = {objects / elapsed:.0f} req/s")
        get_ms, patch_ms = await _latency(http, "small", small, rounds)
        lines.append(f"store={objects + 100} objects: GET {get_ms:.2f} ms, PATCH {patch_ms:.2f} ms (sequential)")

        started = time.perf_counter()
        async with http.get("/api/v1/namespaces/small/configmaps") as resp:
            listed: dict[str, Any] = await resp.json()
        lines.append(f"list 100 of {objects + 100}: {(time.perf_counter() - started) * 1e3:.1f} ms "
                     f"({len(listed['items'])} items)")
        started = time.perf_counter()
        async with http.get("/api/v1/namespaces/bench/configmaps") as resp:
            listed = await resp.json()
        lines.append(f"list {len(listed['items'])}: {(time.perf_counter() - started) * 1e3:.0f} ms")

        rv = listed["metadata"]["resourceVersion"]
        received = [0] * watchers
        ready = asyncio.Event()
        opened = 0

        async def watch(index: int) -> None:
            nonlocal opened
            params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": "120"}
            async with http.get("/api/v1/namespaces/small/configmaps", params=params) as resp:
                opened += 1
                if opened == watchers:
                    ready.set()
                async for line in resp.content:
                    if line.strip():
                        received[index] += 1
                        if received[index] >= events:
                            return

        tasks = [asyncio.create_task(watch(i)) for i in range(watchers)]
        await asyncio.wait_for(ready.wait(), 60)
        started = time.perf_counter()

        async def write(i: int) -> None:
            async with http.patch(f"/api/v1/namespaces/small/configmaps/{small[i % len(small)]}",
                                  data=json.dumps({"data": {"w": str(i)}}),
                                  headers={"Content-Type": "application/merge-patch+json"}) as resp:
                await resp.read()

        await _run_many(events, 4, write)
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
        elapsed = time.perf_counter() - started
        lines.append(f"watch fan-out: {events} writes x {watchers} watchers = {events * watchers} deliveries in "
                     f"{elapsed:.2f} s ({events * watchers / elapsed:.0f} events/s)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--objects", type=int, default=10000)
    parser.add_argument("--watchers", type=int, default=30)
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    for line in asyncio.run(bench(args.objects, args.watchers, args.events, args.rounds)):
        print(line, flush=True)


if __name__ == "__main__":
    main()
