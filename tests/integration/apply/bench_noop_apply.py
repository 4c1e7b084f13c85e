"""Benchmark: API requests and time of a no-op staged apply of N objects (embedded API server).

Run: ``python -m tests.integration.apply.bench_noop_apply [N ...]``; prints one JSON line per N with
the requests of the first apply and of the no-op re-apply (total, per object, writes), and wall times
with the client's default rate limit (50 QPS, burst 300 — upstream's defaults) and without it.
Not collected by pytest: benchmarks measure, tests assert.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
from kustomize_controller.apply.normalize import prepare_objects
from kustomize_controller.apply.selectors import owner_labels
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.runtime.clock import RealClock
from kustomize_controller.testing.apiserver import ApiServer


def objects(n: int) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}]
    objs += [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"cm-{i}", "namespace": "bench"},
            "data": {"i": str(i)},
        }
        for i in range(n - 1)
    ]
    prepare_objects(objs, owner=owner_labels("bench", "flux-system"))
    return objs


async def run(n: int, *, throttled: bool) -> dict[str, Any]:
    async with ApiServer() as server:
        limits: dict[str, Any] = {} if throttled else {"qps": 1e9, "burst": 10**9}
        client = KubeClient(config=await load_kubeconfig(server.kubeconfig_path), **limits)
        try:
            manager = ResourceManager(client=client, clock=RealClock(), concurrency=4)
            objs = objects(n)
            start = time.perf_counter()
            await manager.apply_all_staged(objs, ApplyOptions())
            first_time = time.perf_counter() - start
            first = list(server.requests)
            start = time.perf_counter()
            await manager.apply_all_staged(objs, ApplyOptions())
            noop_time = time.perf_counter() - start
            noop = list(server.requests)[len(first) :]
        finally:
            await client.close()
    return {
        "objects": n,
        "throttled": throttled,
        "first_apply_seconds": round(first_time, 3),
        "noop_apply_seconds": round(noop_time, 3),
        "noop_requests": len(noop),
        "noop_requests_per_object": round(len(noop) / n, 3),
        "noop_writes": sum(1 for r in noop if r.is_write and not r.dry_run),
    }


def main(argv: list[str]) -> None:
    for n in [int(a) for a in argv] or [10, 100, 500]:
        for throttled in (True, False):
            print(json.dumps(asyncio.run(run(n, throttled=throttled))))


if __name__ == "__main__":
    main(sys.argv[1:])
