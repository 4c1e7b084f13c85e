"""The API server restarts (a control-plane upgrade) while a cold start is reconciling Kustomizations: every
one still becomes Ready within seconds of its return, none is ever reported ReconciliationFailed, and no
Warning event is sent (issue 13: on a real cluster, 12 of 300 stayed Ready=False for their retryInterval)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from kustomize_controller.kube.errors import GoneError, KubeError
from tests.integration.controller.conftest import KS_API, ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration

COUNT = 20


async def _follow(env: ControllerEnv, since: str, seen: list[dict[str, Any]], first_ready: asyncio.Event,
                  expired: list[str]) -> None:
    """Every version of the namespace's Kustomizations written after ``since``, across the restart: a cut
    stream is watched again from the last resourceVersion delivered, as a reflector does."""
    rv = since
    while True:
        stream = env.client.watch(KS_API, "Kustomization", env.namespace, resource_version=rv)
        try:
            async with contextlib.aclosing(stream):
                async for event in stream:
                    rv = event["object"]["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        seen.append(event["object"])
                        if condition(event["object"], "Ready") == ("True", "ReconciliationSucceeded"):
                            first_ready.set()
        except GoneError as err:  # the history must still hold the resourceVersion: 410 would lose versions
            expired.append(str(err))
            return
        except KubeError:
            pass  # connection refused or cut: the server is restarting
        await asyncio.sleep(0.1)


async def test_an_api_server_restart_during_a_cold_start_fails_no_kustomization(env: ControllerEnv) -> None:
    server = env.server  # restarts the server: needs the embedded one
    artifact = await env.publish({f"cm{i}.yaml": configmap(f"cm{i}") for i in range(5)})
    names = [f"app{i:02d}" for i in range(COUNT)]
    last: dict[str, Any] = {}
    for name in names:
        last = await env.create(env.kustomization(name, targetNamespace=env.namespace, retryInterval="10m",
                                                  interval="1h", nameSuffix=f"-{name}"))
    seen: list[dict[str, Any]] = []
    first_ready = asyncio.Event()
    expired: list[str] = []
    follower = asyncio.create_task(_follow(env, last["metadata"]["resourceVersion"], seen, first_ready, expired))
    try:
        await env.start()
        await asyncio.wait_for(first_ready.wait(), timeout=60)
        ready_before = {o["metadata"]["name"] for o in seen
                        if condition(o, "Ready") == ("True", "ReconciliationSucceeded")}
        cut = await server.restart(down_for=3.0)
        assert cut >= 1  # at least the controller's own watch was cut
        assert len(ready_before) < COUNT, "the restart must fall inside the cold start"
        for name in names:
            ready = await env.wait_ready(name, revision=artifact["revision"], within=90)
            assert condition(ready, "Ready") == ("True", "ReconciliationSucceeded")
        # the controller's watches resumed: a new Kustomization and a new revision are both picked up
        names.append("late")
        await env.create(env.kustomization("late", targetNamespace=env.namespace, retryInterval="10m",
                                           interval="1h", nameSuffix="-late"))
        artifact = await env.publish({f"cm{i}.yaml": configmap(f"cm{i}", {"v": "2"}) for i in range(5)})
        for name in names:
            await env.wait_ready(name, revision=artifact["revision"], within=90)
        # every version written so far reaches the follower before it is judged
        latest = max([int((await env.get_ks(n))["metadata"]["resourceVersion"]) for n in names])
        for _ in range(500):
            if any(int(o["metadata"]["resourceVersion"]) >= latest for o in seen) or follower.done():
                break
            await asyncio.sleep(0.02)
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
    assert not expired
    failed = [(o["metadata"]["name"], condition(o, "Ready"), condition_message(o, "Ready")) for o in seen
              if (condition(o, "Ready") or ("", ""))[0] == "False"]
    assert not failed, "\n".join(f"{n}: {r}: {m}" for n, r, m in failed)
    # the restart fell inside reconciles. One that failed for it is shown in progress (ProgressingWithRetry)
    # only when its final status patch outlasts the outage (the patcher's retries span about as long as
    # the 3 s restart): otherwise that patch fails too and the reconcile ends in an error, retried with
    # the work queue's backoff. Either proves a reconcile met the unreachable server.
    assert env.manager is not None
    errors = env.manager.metrics.registry.get_sample_value(
        "controller_runtime_reconcile_total", {"controller": "kustomization", "result": "error"}) or 0
    assert errors or [o for o in seen if condition(o, "Reconciling") == ("True", "ProgressingWithRetry")]
    for name in names:
        for cm in range(5):
            assert await env.exists("v1", "ConfigMap", f"cm{cm}-{name}")
        warnings = [(e.get("reason"), e.get("message")) for e in await env.events(name)
                    if e.get("type") == "Warning"]
        assert not warnings, f"{name}: {warnings}"
