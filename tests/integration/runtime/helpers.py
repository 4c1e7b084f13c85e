"""Helpers shared by the runtime integration tests: a client for the test cluster, polling, and a
small demo controller that proves the runtime composes without any Kustomization code."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.runtime.clock import Clock
from kustomize_controller.runtime.controller import Controller, Request, Result
from kustomize_controller.runtime.events import EventRecorder
from kustomize_controller.runtime.manager import Manager

MIRROR_LABEL = "demo.example.com/mirror"
KEYS_ANNOTATION = "demo.example.com/keys"


async def make_client(cluster: Any, **kwargs: Any) -> KubeClient:
    config = await load_kubeconfig(cluster.kubeconfig_path)
    return KubeClient(config=config, **kwargs)


async def eventually(check: Callable[[], Awaitable[bool] | bool], *, within: float = 30.0, what: str = "") -> None:
    """Poll ``check`` until it is true; fail after ``within`` seconds (a generous bound, not a measurement)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError(f"not reached within {within}s: {what}")
        await asyncio.sleep(0.05)


def configmap(name: str, namespace: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {MIRROR_LABEL: "true"}},
        "data": data,
    }


class MirrorReconciler:
    """Writes the sorted keys of a ConfigMap's data into an annotation of that ConfigMap."""

    def __init__(
        self,
        *,
        client: KubeClient,
        manager: Manager,
        recorder: EventRecorder | None,
        clock: Clock,
        name: str = "",
        log: list[tuple[str, str, float, float]] | None = None,
        hold: float = 0.0,
    ) -> None:
        self.client = client
        self.informer = manager.informer("v1", "ConfigMap", label_selector=f"{MIRROR_LABEL}=true")
        self.recorder = recorder
        self.clock = clock
        self.name = name
        self.log = log if log is not None else []
        self.hold = hold
        self.controller: Controller | None = None

    async def reconcile(self, request: Request) -> Result:
        start = self.clock.monotonic()
        try:
            obj = self.informer.get(f"{request.namespace}/{request.name}")
            if obj is None:
                return Result()
            keys = ",".join(sorted(obj.get("data") or {}))
            annotations = obj["metadata"].get("annotations") or {}
            if self.hold:
                await self.clock.sleep(self.hold)
            if annotations.get(KEYS_ANNOTATION) != keys:
                patch = {"metadata": {"annotations": {KEYS_ANNOTATION: keys}}}
                await self.client.patch("v1", "ConfigMap", request.name, request.namespace, patch, patch_type="merge")
            if self.recorder is not None:
                await self.recorder.record(
                    obj, event_type="Normal", reason="Mirrored", message=f"keys: {keys}", annotations={}
                )
            return Result(requeue_after=3600)
        finally:
            self.log.append((self.name, str(request), start, self.clock.monotonic()))


def mirror_controller(
    manager: Manager,
    *,
    client: KubeClient,
    clock: Clock,
    recorder: EventRecorder | None = None,
    name: str = "",
    log: list[tuple[str, str, float, float]] | None = None,
    hold: float = 0.0,
) -> MirrorReconciler:
    reconciler = MirrorReconciler(
        client=client, manager=manager, recorder=recorder, clock=clock, name=name, log=log, hold=hold
    )
    controller = Controller(
        name="configmap-mirror", reconciler=reconciler, clock=clock, metrics=manager.metrics, concurrency=2
    )
    controller.watch(reconciler.informer)
    manager.add_controller(controller)
    reconciler.controller = controller
    return reconciler
