"""drift-detection: warn (docs/drift.md): a hot-fix survives reconciles and is reported — Drifted condition,
one DriftDetected event, gotk_drift_objects — while a new revision still rolls out what changed in it, and
switching back to enabled corrects it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kustomize_controller.api.drift import DRIFT_DETECTION_ANNOTATION
from tests.integration.controller.conftest import KS_API, ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap, deployment, kustomization
from tests.integration.controller.test_metrics import scrape, values

pytestmark = pytest.mark.integration


def files(mode: str = "safe") -> dict[str, str]:
    return {"kustomization.yaml": kustomization("web.yaml", "cm.yaml"),
            "web.yaml": deployment("web"), "cm.yaml": configmap("settings", {"mode": mode})}


async def set_mode(env: ControllerEnv, mode: str) -> None:
    await env.client.patch(KS_API, "Kustomization", "app", env.namespace,
                           {"metadata": {"annotations": {DRIFT_DETECTION_ANNOTATION: mode}}}, patch_type="merge")


async def scale(env: ControllerEnv, replicas: int) -> None:
    # what `kubectl scale` changes, written by a kubectl manager (taken over by upstream's cleanup)
    await env.client.patch("apps/v1", "Deployment", "web", env.namespace, {"spec": {"replicas": replicas}},
                           patch_type="merge", field_manager="kubectl-scale")


async def replicas(env: ControllerEnv) -> int:
    return int((await env.get("apps/v1", "Deployment", "web"))["spec"]["replicas"])


async def drift_events(env: ControllerEnv) -> list[dict[str, Any]]:
    return [e for e in await env.events() if e.get("reason") == "DriftDetected"]


async def drift_gauge(env: ControllerEnv, *, expect: list[float]) -> list[float]:
    """The gauge's samples, once they equal ``expect`` (metrics are recorded just after the status patch)."""
    me = {"kind": "Kustomization", "name": "app", "namespace": env.namespace}
    got: list[float] = []
    for _ in range(100):
        got = values(await scrape(env), "gotk_drift_objects", **me)
        if got == expect:
            break
        await asyncio.sleep(0.05)
    return got


async def start_warn(env: ControllerEnv) -> dict[str, Any]:
    artifact = await env.publish(files())
    await env.start()
    ks = env.kustomization(targetNamespace=env.namespace)
    ks["metadata"]["annotations"] = {DRIFT_DETECTION_ANNOTATION: "warn"}
    await env.create(ks)
    obj = await env.wait_ready(revision=artifact["revision"])
    assert condition(obj, "Drifted") == ("False", "NoDrift")
    return artifact


async def test_warn_mode_reports_a_scale_and_keeps_it(env: ControllerEnv) -> None:
    ns = env.namespace
    await start_warn(env)
    assert await drift_gauge(env, expect=[0.0]) == [0.0]
    await scale(env, 3)

    for _ in range(2):  # the drift outlives reconciles; it is reported once
        obj = await env.wait_handled(await env.request_reconcile())
        assert condition(obj, "Ready") == ("True", "ReconciliationSucceeded")
        assert condition(obj, "Drifted") == ("True", "DriftDetected")
        assert condition_message(obj, "Drifted").splitlines()[1:] == [f"Deployment/{ns}/web"]
        assert await replicas(env) == 3
    events = await drift_events(env)
    assert len(events) == 1 and events[0]["type"] == "Warning" and events[0].get("count", 1) == 1
    assert f"Deployment/{ns}/web (spec.replicas)" in events[0]["message"]
    assert await drift_gauge(env, expect=[1.0]) == [1.0]
    me = {"kind": "Kustomization", "name": "app", "namespace": ns}
    assert values(await scrape(env), "gotk_reconcile_condition", **me, type="Drifted", status="True") == [1.0]

    # a new revision that changes another object rolls it out and leaves the hot-fix alone
    artifact = await env.publish(files(mode="fast"))
    obj = await env.wait_ready(revision=artifact["revision"])
    assert (await env.get("v1", "ConfigMap", "settings"))["data"] == {"mode": "fast"}
    assert await replicas(env) == 3
    assert condition(obj, "Drifted") == ("True", "DriftDetected")
    assert len(await drift_events(env)) == 1

    # back to enabled: the annotation change itself triggers the reconcile that corrects the drift
    await set_mode(env, "enabled")
    obj = await env.wait_for("app", lambda o: condition(o, "Drifted") is None)
    assert condition(obj, "Ready") == ("True", "ReconciliationSucceeded")
    assert await replicas(env) == 1
    assert await drift_gauge(env, expect=[]) == []
    assert values(await scrape(env), "gotk_reconcile_condition", **me, type="Drifted") == []


async def test_the_record_survives_a_controller_restart(env: ControllerEnv) -> None:
    ns = env.namespace
    await start_warn(env)
    await scale(env, 2)
    obj = await env.wait_handled(await env.request_reconcile())
    assert condition(obj, "Drifted") == ("True", "DriftDetected")
    await env.stop()
    await env.start()  # a new process: no memory, the build digest in status.history decides
    obj = await env.wait_handled(await env.request_reconcile())
    assert condition(obj, "Drifted") == ("True", "DriftDetected")
    assert condition_message(obj, "Drifted").splitlines()[1:] == [f"Deployment/{ns}/web"]
    assert await replicas(env) == 2
    assert len(await drift_events(env)) == 1  # the same drift, already reported


async def test_an_invalid_mode_fails_before_anything_is_written(env: ControllerEnv) -> None:
    await start_warn(env)
    await scale(env, 2)
    await set_mode(env, "disabled")
    obj = await env.wait_handled(await env.request_reconcile())
    assert condition(obj, "Ready") == ("False", "ReconciliationFailed")
    assert DRIFT_DETECTION_ANNOTATION in condition_message(obj, "Ready")
    assert await replicas(env) == 2


async def test_a_deleted_object_is_reported_not_recreated(env: ControllerEnv) -> None:
    ns = env.namespace
    await start_warn(env)
    await scale(env, 2)
    await env.wait_handled(await env.request_reconcile())
    await env.client.delete("v1", "ConfigMap", "settings", ns)
    obj = await env.wait_handled(await env.request_reconcile())
    assert condition(obj, "Ready") == ("True", "ReconciliationSucceeded")
    assert condition_message(obj, "Drifted").splitlines()[1:] == [f"ConfigMap/{ns}/settings", f"Deployment/{ns}/web"]
    assert not await env.exists("v1", "ConfigMap", "settings")
    assert f"{ns}_settings__ConfigMap" in [e["id"] for e in obj["status"]["inventory"]["entries"]]  # still ours
    events = await drift_events(env)
    assert len(events) == 2  # a new set of drifted objects is a new drift
    assert f"ConfigMap/{ns}/settings (deleted)" in events[-1]["message"]

    await set_mode(env, "enabled")
    await env.wait_for("app", lambda o: condition(o, "Drifted") is None)
    assert await env.exists("v1", "ConfigMap", "settings")
    assert await replicas(env) == 1


async def test_after_a_restart_a_new_revision_still_leaves_the_scale_alone(env: ControllerEnv) -> None:
    """No memory and a new build: the managed fields prove the Deployment's desired state unchanged."""
    ns = env.namespace
    await start_warn(env)
    await scale(env, 4)
    await env.wait_handled(await env.request_reconcile())
    await env.stop()
    artifact = await env.publish(files(mode="fast"))  # lands while the controller is down
    await env.start()
    obj = await env.wait_ready(revision=artifact["revision"])
    assert (await env.get("v1", "ConfigMap", "settings"))["data"] == {"mode": "fast"}
    assert await replicas(env) == 4
    assert condition_message(obj, "Drifted").splitlines()[1:] == [f"Deployment/{ns}/web"]
