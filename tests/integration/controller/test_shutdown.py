"""A stop (SIGTERM) while a reconcile waits: the controller exits promptly, whatever it is doing.

The e2e teardown found it: a controller stopped while finalizing a Kustomization sat out its whole
30 s grace period. Upstream cancels the reconcile context as soon as the manager stops; so do we.
The finalization here waits on an object held by someone else's finalizer (``WaitForTermination``),
which works the same on a real cluster.
"""

from __future__ import annotations

import asyncio

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
