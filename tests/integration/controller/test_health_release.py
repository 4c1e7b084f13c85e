"""Health waits released from their worker (our default; ``HoldWorkerDuringHealthChecks`` restores
upstream's worker-held waits): a waiting Kustomization leaves its worker to others, and its wait ends
when the Kustomization is deleted, disappears, is suspended, or the controller stops — no wait outlives
its Kustomization. The Widget here is Pending until the test sets it Ready, and every wait has a
5-minute timeout, so only the event under test can end it within the test."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tests.integration.controller.conftest import KS_API, ControllerEnv, condition
from tests.integration.controller.manifests import configmap
from tests.integration.controller.test_health import WIDGET, WIDGET_CRD, WIDGET_EXPRS, health_running, set_widget_phase

pytestmark = pytest.mark.integration


def detached(env: ControllerEnv) -> float | None:
    assert env.manager is not None
    return env.manager.metrics.registry.get_sample_value(
        "controller_detached_reconciles", {"controller": "kustomization"})


async def until(check: Callable[[], bool], *, within: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


async def start_waiting(env: ControllerEnv, **settings: object) -> dict[str, str]:
    artifact = await env.publish({"app/crd.yaml": WIDGET_CRD, "app/widget.yaml": WIDGET,
                                  "other/cm.yaml": configmap("other")})
    await env.start(**settings)
    await env.create(env.kustomization(targetNamespace=env.namespace, path="./app", timeout="5m",
                                       healthCheckExprs=WIDGET_EXPRS,
                                       healthChecks=[{"apiVersion": "test.example.com/v1", "kind": "Widget",
                                                      "name": "w", "namespace": env.namespace}]))
    await env.wait_for("app", health_running)
    await until(lambda: detached(env) == 1)  # the wait gave its worker back
    return artifact


async def canceled_by_itself(env: ControllerEnv) -> None:
    event = await env.wait_event(lambda e: e["reason"] == "HealthCheckCanceled")
    assert event["message"] == (
        f"Health checks canceled due to new reconciliation triggered by Kustomization/{env.namespace}/app")


async def test_a_waiting_kustomization_leaves_its_only_worker_to_others(env: ControllerEnv) -> None:
    artifact = await start_waiting(env, concurrent=1)
    # with --concurrent=1 and a worker-held wait of 5 minutes this would not happen within the test
    await env.create(env.kustomization("other", targetNamespace=env.namespace, path="./other"))
    await env.wait_ready("other", revision=artifact["revision"])
    assert health_running(await env.get_ks("app"))
    await set_widget_phase(env, "Ready")
    obj = await env.wait_ready("app", revision=artifact["revision"])
    assert condition(obj, "Healthy") == ("True", "Succeeded")
    assert detached(env) == 0


async def test_deletion_ends_the_wait(env: ControllerEnv) -> None:
    await start_waiting(env)
    await env.delete_ks()
    await env.wait_gone()
    await canceled_by_itself(env)  # then the finalizer ran (the object is gone)
    await until(lambda: detached(env) == 0)


async def test_a_kustomization_gone_without_its_finalizer_ends_the_wait(env: ControllerEnv) -> None:
    await start_waiting(env)
    await env.client.patch(KS_API, "Kustomization", "app", env.namespace,
                           {"metadata": {"finalizers": None}}, patch_type="merge")
    await env.delete_ks()
    await env.wait_gone()
    await until(lambda: detached(env) == 0)
    assert await env.exists("test.example.com/v1", "Widget", "w")  # nothing to finalize: left alone


async def test_suspension_ends_the_wait_and_resuming_waits_again(env: ControllerEnv) -> None:
    await start_waiting(env)
    await env.patch_spec({"suspend": True})
    await canceled_by_itself(env)
    await until(lambda: detached(env) == 0)
    obj = await env.get_ks()
    assert condition(obj, "Ready") == ("False", "HealthCheckCanceled")
    await env.patch_spec({"suspend": False})
    await until(lambda: detached(env) == 1)
    await env.wait_for("app", health_running)


async def test_a_graceful_stop_ends_the_wait_at_once(env: ControllerEnv) -> None:
    await start_waiting(env)
    # a worker-held wait would keep the stop waiting for the whole grace period
    assert await env.stop_without_grace() == 0
    assert detached(env) == 0
    obj = await env.get_ks()
    assert health_running(obj)  # nothing was decided: the next start checks health again


async def test_a_new_revision_waits_behind_a_released_wait_without_the_gate(env: ControllerEnv) -> None:
    first = await start_waiting(env)
    second = await env.publish({"app/crd.yaml": WIDGET_CRD, "app/widget.yaml": WIDGET,
                                "app/cm.yaml": configmap("second"), "other/cm.yaml": configmap("other")})
    await asyncio.sleep(2)  # the source event arrives; the key is still busy with the wait
    obj = await env.get_ks()
    assert health_running(obj) and obj["status"]["lastAttemptedRevision"] == first["revision"]
    assert not await env.exists("v1", "ConfigMap", "second")
    await set_widget_phase(env, "Ready")
    # the wait ends as upstream's would, then the queued event runs the new revision
    await env.wait_ready(revision=second["revision"])
    assert await env.exists("v1", "ConfigMap", "second")
    assert detached(env) == 0
