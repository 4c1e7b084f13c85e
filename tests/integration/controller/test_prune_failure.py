"""A failed prune (upstream v1.9 #1664): Ready=False ``PruneFailed``, the objects whose DELETE failed stay
in the inventory and are retried by the next reconcile; a failed delete at finalization keeps the
finalizer (retried with backoff) and emits "pruning for deleted resource failed"."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


async def test_survivors_stay_in_the_inventory_and_are_retried(env: ControllerEnv) -> None:
    server = env.server
    ns = env.namespace
    first = await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b"), "c.yaml": configmap("c")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, retryInterval="1s"))
    await env.wait_ready(revision=first["revision"])
    server.faults.reject_deletes(resource="configmaps", namespace=ns, name="b", webhook="guard.example.com",
                                 message="protected")
    second = await env.publish({"a.yaml": configmap("a")})
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "PruneFailed"))
    assert f"ConfigMap/{ns}/b" in condition_message(obj, "Ready")
    ids = sorted(e["id"] for e in obj["status"]["inventory"]["entries"])
    assert ids == [f"{ns}_a__ConfigMap", f"{ns}_b__ConfigMap"]  # c went, b survived
    assert not await env.exists("v1", "ConfigMap", "c")
    assert obj["status"]["history"][0]["lastReconciledStatus"] == "PruneFailed"
    assert obj["status"].get("lastAppliedRevision") == first["revision"]

    server.faults.clear()
    obj = await env.wait_ready(revision=second["revision"])
    assert [e["id"] for e in obj["status"]["inventory"]["entries"]] == [f"{ns}_a__ConfigMap"]
    assert not await env.exists("v1", "ConfigMap", "b")


async def test_failed_delete_at_finalization_keeps_the_finalizer(env: ControllerEnv) -> None:
    server = env.server
    ns = env.namespace
    artifact = await env.publish({"a.yaml": configmap("a")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    await env.wait_ready(revision=artifact["revision"])
    server.faults.reject_deletes(resource="configmaps", namespace=ns, name="a", webhook="guard.example.com",
                                 message="protected")
    await env.delete_ks()
    event = await env.wait_event(lambda e: e["type"] == "Warning")
    assert event["message"] == "pruning for deleted resource failed"
    assert "finalizers.fluxcd.io" in (await env.get_ks())["metadata"]["finalizers"]
    server.faults.clear()
    await env.wait_gone()
    assert not await env.exists("v1", "ConfigMap", "a")
