"""Events (upstream §5.11): core/v1 Events with reason = the Ready reason at the time, Normal for
progress and success, Warning for errors, revision metadata as annotations, the Kustomization's
``event.toolkit.fluxcd.io/*`` annotations copied; the same events POSTed to ``--events-addr``."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from tests.integration.controller.conftest import ControllerEnv
from tests.integration.controller.manifests import configmap
from tests.loopback import serve

pytestmark = pytest.mark.integration

GROUP = "kustomize.toolkit.fluxcd.io"


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    received: list[dict[str, Any]] = []

    async def handle(request: web.Request) -> web.Response:
        received.append(await request.json())
        return web.Response(status=202)

    app = web.Application()
    app.router.add_post("/", handle)
    runner, url = await serve(app)
    try:
        yield f"{url}/", received
    finally:
        await runner.cleanup()


async def test_event_catalogue_of_a_successful_reconcile(env: ControllerEnv,
                                                        receiver: tuple[str, list[dict[str, Any]]]) -> None:
    url, received = receiver
    ns = env.namespace
    artifact = await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b")})
    await env.start(events_addr=url)
    ks = env.kustomization(targetNamespace=ns)
    ks["metadata"]["annotations"] = {"event.toolkit.fluxcd.io/team": "blue", "unrelated": "x"}
    await env.create(ks)
    await env.wait_ready(revision=artifact["revision"])

    changes = await env.wait_event(lambda e: "created" in e["message"])
    assert changes["type"] == "Normal"
    assert changes["reason"] == "Progressing"
    assert changes["message"] == f"ConfigMap/{ns}/a created\nConfigMap/{ns}/b created"
    # as client-go's recorder in upstream's controller writes them (compared on a real cluster by
    # e2e/flux): no host in the source, an empty reportingInstance
    assert changes["source"] == {"component": "kustomize-controller"}
    assert changes["reportingComponent"] == "kustomize-controller"
    assert changes["reportingInstance"] == ""
    assert changes["involvedObject"]["kind"] == "Kustomization"
    assert changes["involvedObject"]["apiVersion"] == f"{GROUP}/v1"
    annotations = changes["metadata"].get("annotations") or {}
    assert annotations[f"{GROUP}/revision"] == artifact["revision"]
    assert annotations["event.toolkit.fluxcd.io/team"] == "blue"
    assert "unrelated" not in annotations

    finished = await env.wait_event(lambda e: e["message"].startswith("Reconciliation finished"))
    assert finished["type"] == "Normal"
    assert finished["reason"] == "ReconciliationSucceeded"
    assert re.fullmatch(r"Reconciliation finished in \S+, next run in 10m0s", finished["message"])
    annotations = finished["metadata"]["annotations"]
    assert annotations[f"{GROUP}/revision"] == artifact["revision"]
    assert annotations[f"{GROUP}/commit_status"] == "update"

    for _ in range(300):
        if any(p["message"].startswith("Reconciliation finished") for p in received):
            break
        await asyncio.sleep(0.1)
    posted = {p["message"]: p for p in received}
    payload = posted[finished["message"]]
    assert payload["severity"] == "info"
    assert payload["reason"] == "ReconciliationSucceeded"
    assert payload["reportingController"] == "kustomize-controller"
    assert payload["involvedObject"]["kind"] == "Kustomization"
    assert payload["involvedObject"]["name"] == "app"
    assert payload["metadata"][f"{GROUP}/revision"] == artifact["revision"]
    assert payload["metadata"]["event.toolkit.fluxcd.io/team"] == "blue"
    assert posted[changes["message"]]["reason"] == "Progressing"


async def test_failure_is_a_warning_and_no_success_event(env: ControllerEnv) -> None:
    await env.publish({"kustomization.yaml": "resources: [nope.yaml]\n"})
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace))
    warning = await env.wait_event(lambda e: e["type"] == "Warning")
    assert warning["reason"] == "BuildFailed"
    assert warning["message"].startswith("kustomize build failed: ")
    assert not [e for e in await env.events() if e["message"].startswith("Reconciliation finished")]


async def test_source_not_found_emits_no_event(env: ControllerEnv) -> None:
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace, retryInterval="1s"))
    obj = await env.wait_for("app", lambda o: (o.get("status") or {}).get("conditions") is not None)
    assert obj["status"]["conditions"][0]["message"] == (
        'GitRepository.source.toolkit.fluxcd.io "repo" not found')
    token = await env.request_reconcile()
    await env.wait_handled(token)
    assert await env.events() == []
