"""notification-controller receives our events (``--events-addr``) and forwards them through an Alert to a
generic-webhook Provider: for a successful apply and for a failure, the payload the Provider's endpoint
gets is the one Flux's own kustomize-controller makes it send — reason, message, severity, involved
object, metadata (revision, commit status, the Kustomization's ``event.toolkit.fluxcd.io/`` annotations)
and the ``Gotk-Component`` header."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.flux.cli import normalise
from tests.flux.gitserver import GitServer
from tests.flux.receiver import EventReceiver, ReceivedRequest

from ..harness import configmap, eventually
from .conftest import FluxControllers
from .sides import KS_API, SOURCE_API, Pair, Side, payload_view
from .test_git import post, receiver_hook

pytestmark = [pytest.mark.timeout(420), pytest.mark.upstream]

FILES = {
    "kustomization.yaml": "resources:\n- settings.yaml\n- extra.yaml\n",
    "settings.yaml": configmap("settings", mode="one"),
    "extra.yaml": configmap("extra"),
}


async def forwarded(pair: Pair, receiver: EventReceiver, reason: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first notification with ``reason`` each side's Provider got, masked for comparison; checks the
    request itself is the same (method, headers that matter)."""

    async def first(side: Side) -> ReceivedRequest:
        return await receiver.wait_for(lambda e: e.path == f"/{side.label}" and e.body["reason"] == reason,
                                       within=90, what=f"{side.label}'s {reason} notification")

    ours, upstream = await pair.each(first)
    for request in (ours, upstream):
        assert request.method == "POST"
        assert request.headers.get("Gotk-Component") == "kustomize-controller", request.headers
        assert request.headers.get("Content-Type") == "application/json", request.headers
    mine, theirs = payload_view(ours.body, pair.names), payload_view(upstream.body, pair.names)
    assert mine == theirs, f"{reason}: ours {mine}\nupstream {theirs}"
    return mine, theirs


async def recorded_events(side: Side, names: dict[str, str]) -> set[str]:
    """The Kustomization's core/v1 Events, each without what differs by design or by timing (name, uid,
    resourceVersion, times, count), as sorted JSON."""
    views = set()
    for event in await side.kube.list("v1", "Event", side.namespace):
        if event["involvedObject"].get("kind") != "Kustomization":
            continue
        view = {key: event.get(key) for key in ("type", "reason", "message", "source", "reportingComponent",
                                                "reportingInstance", "action", "related")}
        view["annotations"] = event["metadata"].get("annotations")
        involved = event["involvedObject"]
        view["involvedObject"] = {k: involved.get(k) for k in ("apiVersion", "kind", "name", "namespace")}
        views.add(normalise(json.dumps(view, sort_keys=True), names, collapse_space=False))
    return views


async def test_alerts_carry_what_upstream_sends(pair: Pair, git_server: GitServer, receiver: EventReceiver) -> None:
    repo = await git_server.create("app")
    first = repo.revision(await repo.commit(FILES))

    async def setup(side: Side) -> None:
        await side.alert(f"{receiver.url}{side.label}")
        await side.git_repository("app", repo.url)
        await side.kustomization("app", annotations={"event.toolkit.fluxcd.io/env": "e2e"})

    await pair.each(setup)
    await pair.each(lambda side: side.wait_applied(first))

    progressing, _ = await forwarded(pair, receiver, "Progressing")
    assert progressing["severity"] == "info"
    assert progressing["message"] == "ConfigMap/<ns>/extra created\nConfigMap/<ns>/settings created"
    assert progressing["metadata"] == {"revision": first, "env": "e2e"}
    succeeded, _ = await forwarded(pair, receiver, "ReconciliationSucceeded")
    assert succeeded["severity"] == "info"
    assert succeeded["message"] == "Reconciliation finished in <duration>, next run in <duration>"
    assert succeeded["metadata"] == {"revision": first, "commit_status": "update", "env": "e2e"}
    assert succeeded["involvedObject"] == {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "name": "app",
        "namespace": "<ns>", "uid": "<uid>", "resourceVersion": "<resourceVersion>"}
    assert succeeded["reportingController"] == "kustomize-controller"

    # the core/v1 Events behind them (what `flux events` and `kubectl describe` show) are recorded alike
    ours_events, upstream_events = await pair.each(lambda side: recorded_events(side, pair.names))
    assert ours_events == upstream_events, f"ours {ours_events}\nupstream {upstream_events}"

    # a broken commit: the failure goes out as an error with the build's message
    broken = repo.revision(await repo.commit({
        "bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\ndata:\n  key: [1\n",
        "kustomization.yaml": "resources:\n- settings.yaml\n- bad.yaml\n"}))
    await pair.each(lambda side: side.request_reconcile(SOURCE_API, "GitRepository", "app"))
    await pair.each(lambda side: side.wait_failed(broken))
    failed, _ = await forwarded(pair, receiver, "BuildFailed")
    assert failed["severity"] == "error"
    assert failed["message"].startswith("kustomize build failed: accumulating resources"), failed["message"]
    assert failed["metadata"] == {"revision": broken, "env": "e2e"}


async def test_receiver_requests_a_reconcile(pair: Pair, git_server: GitServer,
                                             flux_controllers: FluxControllers) -> None:
    """A Receiver aimed at the Kustomization writes ``requestedAt`` as Go's ``Time.String()`` (with a monotonic
    clock suffix); the controller copies it byte for byte into ``lastHandledReconcileAt``, as upstream's does."""
    repo = await git_server.create("app")
    revision = repo.revision(await repo.commit(FILES))

    async def setup(side: Side) -> str:
        await side.git_repository("app", repo.url)
        await side.kustomization("app")
        await side.wait_applied(revision)
        return await receiver_hook(side, flux_controllers, resource={
            "apiVersion": KS_API, "kind": "Kustomization", "name": "app"})

    hooks = await pair.each(setup)
    for hook in hooks:
        assert await post(hook) == 200

    async def handled(side: Side) -> str:
        def done(obj: dict[str, Any]) -> bool:
            token = (obj["metadata"].get("annotations") or {}).get("reconcile.fluxcd.io/requestedAt")
            return token is not None and (obj.get("status") or {}).get("lastHandledReconcileAt") == token

        ks = await eventually(side.ks, done, within=90, what=f"{side.label}: the Receiver's request handled")
        return str(ks["status"]["lastHandledReconcileAt"])

    tokens = await pair.each(handled)
    for token in tokens:
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \+0000 UTC m=\+\d+\.\d+", token), token
