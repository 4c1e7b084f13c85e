"""Benchmarks of the runtime (not a test: run ``python -m tests.integration.runtime.bench_runtime``).

Prints throughput numbers for the workqueue, the controller loop, and an informer fed by the embedded
API server. Numbers depend on the machine; they are for comparing changes, never asserted.
"""

from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.runtime.clock import RealClock
from kustomize_controller.runtime.controller import Controller, Request, Result
from kustomize_controller.runtime.informer import FuncHandler, Informer
from kustomize_controller.runtime.metrics import RuntimeMetrics
from kustomize_controller.runtime.workqueue import WorkQueue
from kustomize_controller.testing.apiserver import ApiServer


async def bench_workqueue(n: int = 200_000) -> None:
    clock = RealClock()
    metrics = RuntimeMetrics(clock=clock, registry=CollectorRegistry())
    for label, q in (
        ("plain", WorkQueue[str](clock=clock)),
        ("with metrics", WorkQueue[str](clock=clock, metrics=metrics.queue("bench"))),
    ):
        keys = [f"ns/k{i}" for i in range(n)]
        start = time.perf_counter()
        for k in keys:
            q.add(k)
        for _ in range(n):
            k = await q.get()
            q.done(k)
        elapsed = time.perf_counter() - start
        print(f"workqueue ({label}): {n / elapsed:,.0f} add+get+done per second")


async def bench_controller(n: int = 50_000) -> None:
    clock = RealClock()

    finished = asyncio.Event()
    count = 0

    class Noop:
        async def reconcile(self, request: Request) -> Result:
            nonlocal count
            count += 1
            if count == n:
                finished.set()
            return Result()

    ctrl = Controller(
        name="bench",
        reconciler=Noop(),
        clock=clock,
        metrics=RuntimeMetrics(clock=clock, registry=CollectorRegistry()),
        concurrency=4,
    )
    run = asyncio.create_task(ctrl.run())
    start = time.perf_counter()
    for i in range(n):
        ctrl.queue.add(Request("ns", f"k{i}"))
    await finished.wait()
    elapsed = time.perf_counter() - start
    ctrl.stop()
    await run
    print(f"controller (no-op reconcile, 4 workers): {n / elapsed:,.0f} reconciles per second")


async def bench_informer(n: int = 2_000) -> None:
    async with ApiServer() as server:
        client = KubeClient(config=await load_kubeconfig(server.kubeconfig_path), qps=-1, burst=-1)
        sem = asyncio.Semaphore(16)

        async def create(i: int, prefix: str) -> None:
            async with sem:
                await client.create(
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": f"{prefix}{i}", "namespace": "default"},
                        "data": {"k": "v" * 100},
                    }
                )

        start = time.perf_counter()
        await asyncio.gather(*(create(i, "a") for i in range(n)))
        print(f"client: {n / (time.perf_counter() - start):,.0f} creates per second (16 in flight, embedded server)")
        informer = Informer(client=client, api_version="v1", kind="ConfigMap", namespace="default", clock=RealClock())
        mirrored = asyncio.Event()

        def on_add(_obj: dict, _initial: bool) -> None:
            if len(informer.store) >= 2 * n:
                mirrored.set()

        informer.add_handler(FuncHandler(add=on_add))
        start = time.perf_counter()
        task = asyncio.create_task(informer.run())
        await informer.wait_for_sync()
        print(f"informer: initial list of {n} objects synced in {time.perf_counter() - start:.2f}s")
        start = time.perf_counter()
        await asyncio.gather(*(create(i, "b") for i in range(n)))
        await mirrored.wait()
        print(
            f"informer: {n} watch events mirrored at {n / (time.perf_counter() - start):,.0f} events per second "
            "(bounded by the creates)"
        )
        task.cancel()
        await client.close()


async def main() -> None:
    await bench_workqueue()
    await bench_controller()
    await bench_informer()


if __name__ == "__main__":
    asyncio.run(main())
