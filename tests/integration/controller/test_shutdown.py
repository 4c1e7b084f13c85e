"""A stop (SIGTERM) while a reconcile waits: the controller exits promptly, whatever it is doing.

The e2e teardown found it: a controller stopped while finalizing a Kustomization sat out its whole
30 s grace period. Upstream cancels the reconcile context as soon as the manager stops; so do we.
The finalization here waits on an object held by someone else's finalizer (``WaitForTermination``),
which works the same on a real cluster.
"""

from __future__ import annotations

import asyncio
import gc
import warnings

import pytest

from kustomize_controller.api.meta import FINALIZER
from tests.integration.controller.conftest import KS_API, ControllerEnv
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration

HOLD = "example.com/hold"


async def test_stop_during_a_finalization_cancels_it_and_exits_at_once(env: ControllerEnv) -> None:
    ns = env.namespace
    artifact = await env.publish({"cm.yaml": configmap("held")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, deletionPolicy="WaitForTermination", timeout="10m"))
    await env.wait_ready(revision=artifact["revision"])
    await env.client.patch("v1", "ConfigMap", "held", ns, {"metadata": {"finalizers": [HOLD]}},
                           patch_type="merge", field_manager="someone")
    try:
        await env.delete_ks()

        async def terminating() -> bool:
            live = await env.client.get("v1", "ConfigMap", "held", ns)
            return bool(live["metadata"].get("deletionTimestamp"))

        for _ in range(300):  # the finalization deleted the object and now waits for it to go
            if await terminating():
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the finalization never deleted ConfigMap held")
        # the wait is 10 min and the grace period longer than the bound on the stop: an exit at all means
        # the in-flight finalization was cancelled, not waited for (before the fix it sat out the grace period)
        assert await env.stop_without_grace() == 0
        env.task = None
        # cancelled, not completed: the Kustomization keeps its finalizer for the next controller
        ks = await env.get_ks()
        assert FINALIZER in ks["metadata"]["finalizers"]
    finally:
        await env.client.patch("v1", "ConfigMap", "held", ns, {"metadata": {"finalizers": None}},
                               patch_type="merge", field_manager="someone")
        await env.client.patch(KS_API, "Kustomization", "app", ns, {"metadata": {"finalizers": None}},
                               patch_type="merge")


async def test_stopped_while_starting_it_closes_its_api_client(env: ControllerEnv) -> None:
    """The fault-injection tests found it: a controller cancelled before its manager ran (here: while it
    probes the API server for priority and fairness) left its API client's connections open."""
    probe = env.server.faults.delay(3.0, path=r"^/livez/ping$", count=1)
    await env.start()
    for _ in range(250):  # until the probe is in flight (the rule counts it on arrival)
        if probe.remaining == 0:
            break
        await asyncio.sleep(0.02)
    assert probe.remaining == 0 and env.task is not None and not env.task.done()
    await env.stop()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        await asyncio.sleep(0.1)
        for _ in range(3):
            gc.collect()  # an unclosed aiohttp session or connector warns when collected
    assert not [str(w.message) for w in caught if "Unclosed" in str(w.message)]
