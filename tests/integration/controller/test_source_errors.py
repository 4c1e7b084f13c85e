"""Source problems (upstream §5 steps 7–8, §5.12): a missing source, a source without artifact and an
artifact the server no longer has are Ready=False ``ArtifactFailed`` with upstream's messages, no event,
and nothing applied; the Kustomization recovers on its own when the source is fixed."""

from __future__ import annotations

import pytest

from kustomize_controller.testing.artifacts import remove_artifact
from tests.integration.controller.conftest import ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


def artifact_failed(obj: dict) -> bool:  # type: ignore[type-arg]
    return condition(obj, "Ready") == ("False", "ArtifactFailed")


async def test_source_created_later(env: ControllerEnv) -> None:
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace))
    obj = await env.wait_for("app", artifact_failed)
    # the informer cache's NotFound, as controller-runtime's cache words it (the kind, not the plural)
    assert condition_message(obj, "Ready") == 'GitRepository.source.toolkit.fluxcd.io "repo" not found'
    assert condition(obj, "Reconciling") is None
    artifact = await env.publish({"cm.yaml": configmap("a")})
    await env.wait_ready(revision=artifact["revision"])  # the source watch enqueues it


async def test_source_without_artifact(env: ControllerEnv) -> None:
    first = await env.publish({"cm.yaml": configmap("a")})
    await remove_artifact(env.client, namespace=env.namespace, name="repo")
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace))
    obj = await env.wait_for("app", artifact_failed)
    assert condition_message(obj, "Ready") == "Source artifact not found, retrying in 1s"
    assert await env.events() == []
    await env.publish({"cm.yaml": configmap("a")}, revision=first["revision"])
    await env.wait_ready(revision=first["revision"])


async def test_artifact_gone_from_the_server(env: ControllerEnv) -> None:
    artifact = await env.publish({"cm.yaml": configmap("a")})
    env.artifacts.unpublish(artifact["path"])
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace))
    obj = await env.wait_for("app", artifact_failed)
    assert condition_message(obj, "Ready") == "Source is not ready, artifact not found, retrying in 1s"
    assert "lastAttemptedRevision" not in obj["status"]
    assert not await env.exists("v1", "ConfigMap", "a")
    assert [e for e in await env.events() if e["type"] == "Warning"] == []
    # published again under the same URL: the next --requeue-dependency retry picks it up
    await env.publish({"cm.yaml": configmap("a")})
    await env.wait_ready(revision=artifact["revision"])


async def test_digest_mismatch_is_an_artifact_failure(env: ControllerEnv) -> None:
    artifact = await env.publish({"cm.yaml": configmap("a")})
    env.artifacts.corrupt(artifact["path"])
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace))
    obj = await env.wait_for("app", artifact_failed)
    assert "digest" in condition_message(obj, "Ready")
    assert not await env.exists("v1", "ConfigMap", "a")
    warning = await env.wait_event(lambda e: e["type"] == "Warning")
    assert warning["reason"] == "ArtifactFailed"
