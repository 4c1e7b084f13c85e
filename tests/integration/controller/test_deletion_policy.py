"""Deleting a Kustomization (upstream ``kustomization_deletion_policy_test.go``): what happens to the
objects it applied under each ``deletionPolicy``, and never when suspended."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv
from tests.integration.controller.manifests import configmap

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("wait_mode")]  # both health-wait modes


@pytest.mark.parametrize(
    ("policy", "prune", "deleted"),
    [
        (None, True, True),  # MirrorPrune by default
        ("MirrorPrune", False, False),
        ("Delete", False, True),
        ("Orphan", True, False),
        ("WaitForTermination", False, True),
    ],
)
async def test_deletion_policy(env: ControllerEnv, policy: str | None, prune: bool, deleted: bool) -> None:
    ns = env.namespace
    artifact = await env.publish({"cm.yaml": configmap("a")})
    await env.start()
    spec = {"targetNamespace": ns, "prune": prune}
    if policy:
        spec["deletionPolicy"] = policy
    await env.create(env.kustomization(**spec))
    await env.wait_ready(revision=artifact["revision"])
    await env.delete_ks()
    await env.wait_gone()
    assert await env.exists("v1", "ConfigMap", "a") is not deleted
    if deleted:
        event = await env.wait_event(lambda e: e["message"] == f"ConfigMap/{ns}/a deleted")
        assert event["type"] == "Normal"


async def test_suspended_kustomization_deletes_nothing(env: ControllerEnv) -> None:
    artifact = await env.publish({"cm.yaml": configmap("a")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace, deletionPolicy="Delete"))
    await env.wait_ready(revision=artifact["revision"])
    await env.patch_spec({"suspend": True})
    await env.wait_for("app", lambda o: o["status"].get("observedGeneration") == 2)
    await env.delete_ks()
    await env.wait_gone()
    assert await env.exists("v1", "ConfigMap", "a")


async def test_wait_for_termination_holds_the_finalizer_until_objects_are_gone(env: ControllerEnv) -> None:
    ns = env.namespace
    artifact = await env.publish({"cm.yaml": configmap("a")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, deletionPolicy="WaitForTermination", timeout="5m"))
    await env.wait_ready(revision=artifact["revision"])
    await env.client.patch("v1", "ConfigMap", "a", ns, {"metadata": {"finalizers": ["example.com/hold"]}},
                           patch_type="merge", field_manager="someone")
    await env.delete_ks()
    cm = None
    for _ in range(300):
        cm = await env.get("v1", "ConfigMap", "a")
        if cm["metadata"].get("deletionTimestamp"):
            break
        await __import__("asyncio").sleep(0.1)
    assert cm is not None and cm["metadata"].get("deletionTimestamp")
    # the object is terminating, not gone: the Kustomization must still be there, waiting
    ks = await env.get_ks()
    assert "finalizers.fluxcd.io" in ks["metadata"]["finalizers"]
    await env.client.patch("v1", "ConfigMap", "a", ns, {"metadata": {"finalizers": None}}, patch_type="merge")
    await env.wait_gone()
    assert not await env.exists("v1", "ConfigMap", "a")
