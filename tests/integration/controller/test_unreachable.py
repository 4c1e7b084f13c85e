"""An API server that cannot be reached for a few seconds (a control-plane upgrade restarts it) delays
the reconcile by seconds; it is not reported as ReconciliationFailed, and no failure event is sent."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap
from tests.integration.controller.test_metrics import scrape, values

pytestmark = pytest.mark.integration


async def test_a_few_seconds_of_5xx_are_retried_quickly_and_never_reported_as_failure(env: ControllerEnv) -> None:
    server = env.server  # fault injection: needs the embedded server
    artifact = await env.publish({"cm.yaml": configmap("a")})
    # the first three dry-runs of the ConfigMap are answered 503 without Retry-After, as a server that
    # is going down does; the controller's own requests are the only ones to /configmaps/ here
    rule = server.faults.fail(method="PATCH", path=r"/configmaps/a$", status=503, count=2,
                              message="the server is currently unable to handle the request")
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace, retryInterval="10m"))
    async with env.versions() as seen:
        ready = await env.wait_ready(revision=artifact["revision"], within=60)
    assert rule.hits == 2
    assert condition(ready, "Ready") == ("True", "ReconciliationSucceeded")
    readies = [condition(v, "Ready") for v in seen]
    assert ("False", "ReconciliationFailed") not in readies
    retrying = [condition_message(v, "Reconciling") for v in seen
                if condition(v, "Reconciling") == ("True", "ProgressingWithRetry")]
    assert retrying and retrying[0].startswith("API server unreachable, retrying in 1s: ConfigMap/")
    events = await env.events()
    assert not [e for e in events if e.get("type") == "Warning"]
    # the attempts retried quickly left no ReconciliationFailed history entry either
    assert [(h["lastReconciledStatus"], h["totalReconciliations"]) for h in ready["status"]["history"]] == [
        ("ReconciliationSucceeded", 1)]


async def test_a_lasting_failure_that_is_not_about_reachability_is_reported_at_once(env: ControllerEnv) -> None:
    server = env.server
    await env.publish({"cm.yaml": configmap("a")})
    server.faults.fail(method="PATCH", path=r"/configmaps/a$", status=403, count=None, message="nope")
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace, retryInterval="10m"))
    failed = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "ReconciliationFailed"),
                                within=60)
    assert "nope" in condition_message(failed, "Ready")


async def test_under_load_shedding_every_429_is_waited_out(env: ControllerEnv) -> None:
    """A fifth of the API requests answered 429 + Retry-After (APF shedding load): every Kustomization
    still becomes Ready, none is ever reported failed, and the retries are counted."""
    server = env.server
    server.options.throttle_retry_after = 0  # Retry-After: 0 keeps the test quick; the path is the same
    artifact = await env.publish({"cm.yaml": configmap("a"), "cm2.yaml": configmap("b")})
    names = [f"app{i}" for i in range(6)]
    for name in names:
        await env.create(env.kustomization(name, targetNamespace=env.namespace, retryInterval="10m",
                                           nameSuffix=f"-{name}"))
    server.options.throttle_share = 0.2
    try:
        await env.start()
        for name in names:
            await env.wait_ready(name, revision=artifact["revision"], within=120)
    finally:
        server.options.throttle_share = 0.0
    shed = [r for r in server.requests if r.status == 429]
    assert shed
    samples = await scrape(env)
    assert sum(values(samples, "rest_client_request_retries_total", code="429")) >= 1
    assert not [e for e in await env.events() if e.get("type") == "Warning"]
