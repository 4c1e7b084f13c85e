"""A commit travels the way it does in a Flux cluster: a webhook to notification-controller's Receiver,
source-controller fetching from a Git server over smart HTTP and storing the artifact, our controller
applying it because it watches the GitRepository — not because its own interval came round (one hour)."""

from __future__ import annotations

import sys
import time
from typing import Any

import aiohttp
import pytest

from tests.flux.gitserver import GitServer

from ..harness import configmap, eventually
from .conftest import FluxControllers
from .sides import RECEIVER_API, SOURCE_API, Side, condition

pytestmark = pytest.mark.timeout(420)

FILES = {
    "kustomization.yaml": "resources:\n- settings.yaml\n- extra.yaml\n",
    "settings.yaml": configmap("settings", mode="one"),
    "extra.yaml": configmap("extra"),
}


async def receiver_hook(side: Side, controllers: FluxControllers, *, resource: dict[str, str]) -> str:
    """A generic Receiver for ``resource`` with its token Secret; its webhook URL once notification-controller
    has made it ready."""
    await side.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "webhook-token"},
                       "stringData": {"token": "e2e-webhook-token"}})
    await side.create({"apiVersion": RECEIVER_API, "kind": "Receiver", "metadata": {"name": "push"},
                       "spec": {"type": "generic", "secretRef": {"name": "webhook-token"},
                                "resources": [resource]}})
    receiver = await eventually(lambda: side.get(RECEIVER_API, "Receiver", "push"),
                                lambda obj: bool((obj.get("status") or {}).get("webhookPath")),
                                within=60, what="Receiver/push webhookPath")
    return f"{controllers.receiver_url}{receiver['status']['webhookPath']}"


async def post(url: str) -> int:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http, \
            http.post(url, json={}) as resp:
        return resp.status


async def test_commit_is_applied_through_the_source_watch(
        ours: Side, git_server: GitServer, flux_controllers: FluxControllers) -> None:
    repo = await git_server.create("app")
    first = repo.revision(await repo.commit(FILES))
    await ours.git_repository("app", repo.url)
    hook = await receiver_hook(ours, flux_controllers,
                               resource={"apiVersion": SOURCE_API, "kind": "GitRepository", "name": "app"})
    await ours.kustomization("app", interval="1h")
    ks = await ours.wait_applied(first)
    assert ks["status"]["lastAttemptedRevision"] == first
    assert (await ours.get("v1", "ConfigMap", "settings"))["data"] == {"mode": "one"}
    handled_before = ks["status"].get("lastHandledReconcileAt")

    # a push: a new commit changes one object and drops the other, and the Git host calls the webhook
    second = repo.revision(await repo.commit({"settings.yaml": configmap("settings", mode="two"), "extra.yaml": None,
                                              "kustomization.yaml": "resources:\n- settings.yaml\n"}))
    assert await post(hook) == 200
    started = time.monotonic()
    source = await ours.wait_artifact("GitRepository", "app", revision=second)
    stored_at = time.monotonic()
    ks = await ours.wait_applied(second, within=120)
    applied_at = time.monotonic()
    sys.stderr.write(f"\nartifact stored {stored_at - started:.2f}s after the webhook; applied "
                     f"{applied_at - stored_at:.2f}s after the artifact (interval 1h)\n")

    # nobody asked the Kustomization to reconcile: the token is what it was, and the next interval run is
    # an hour away — only the GitRepository watch can have brought the new revision in
    assert ks["spec"]["interval"] == "1h"
    assert ks["status"].get("lastHandledReconcileAt") == handled_before
    ready = condition(ks, "Ready")
    assert ready is not None and ready["message"] == f"Applied revision: {second}"
    assert (await ours.get("v1", "ConfigMap", "settings"))["data"] == {"mode": "two"}
    assert not await ours.exists("v1", "ConfigMap", "extra"), "the object dropped from Git was not pruned"
    entries = [e["id"] for e in ks["status"]["inventory"]["entries"]]
    assert entries == [f"{ours.namespace}_settings__ConfigMap"]
    # the artifact came from source-controller's own storage server
    url = source["status"]["artifact"]["url"]
    assert url.startswith(flux_controllers.source.urls["storage"] + "/gitrepository/"), url
    assert git_server.requests.get("app", 0) >= 2  # source-controller fetched twice over smart HTTP


async def test_source_not_ready_then_ready(ours: Side, git_server: GitServer,
                                           flux_controllers: FluxControllers) -> None:
    """A GitRepository whose branch does not exist yet: source-controller reports it, our controller waits
    (ArtifactFailed) and applies as soon as the branch is pushed and fetched."""
    repo = await git_server.create("late")
    await ours.git_repository("app", repo.url)
    await ours.kustomization("app", interval="1h")

    def waiting(obj: dict[str, Any]) -> bool:
        ready = condition(obj, "Ready")
        return ready is not None and ready["status"] == "False" and ready["reason"] == "ArtifactFailed"

    ks = await eventually(ours.ks, waiting, within=120, what="Kustomization/app waiting for its source")
    assert condition(ks, "Ready")["message"].startswith("Source artifact not found, retrying in")  # type: ignore[index]
    revision = repo.revision(await repo.commit(FILES))
    await ours.request_reconcile(SOURCE_API, "GitRepository", "app")
    await ours.wait_artifact("GitRepository", "app", revision=revision)
    await ours.wait_applied(revision)
