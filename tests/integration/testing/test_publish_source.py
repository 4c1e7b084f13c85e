"""Publishing a source as source-controller would: the object, its status, and what the controller reads."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest

from kustomize_controller.api.source import parse_source
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.kube.errors import NotFoundError
from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.testing.artifacts import (
    SOURCE_API_VERSION,
    ArtifactServer,
    publish_source,
    remove_artifact,
    set_source_not_ready,
)

pytestmark = pytest.mark.integration

FILES = {"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n"}


@pytest.fixture
async def kube(cluster: Any) -> AsyncIterator[KubeClient]:
    client = KubeClient(config=await load_kubeconfig(cluster.kubeconfig_path))
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def artifacts() -> AsyncIterator[ArtifactServer]:
    async with ArtifactServer() as server:
        yield server


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == type_)


async def test_creates_a_ready_gitrepository(cluster: Any, kube: KubeClient, artifacts: ArtifactServer) -> None:
    fields = await artifacts.publish_files(FILES, name="gitrepository/app")
    await publish_source(kube, namespace=cluster.namespace, name="app", artifact=fields)

    stored = await kube.get(SOURCE_API_VERSION, "GitRepository", "app", cluster.namespace)
    assert stored["spec"]["suspend"] is True
    assert stored["status"]["artifact"] == fields
    assert stored["status"]["observedGeneration"] == stored["metadata"]["generation"]
    for type_ in ("Ready", "ArtifactInStorage"):
        cond = condition(stored, type_)
        assert (cond["status"], cond["reason"]) == ("True", "Succeeded")
        assert cond["message"] == f"stored artifact for revision '{fields['revision']}'"
    # what the controller's model makes of it
    source = parse_source(stored)
    assert source.is_ready()
    artifact = source.get_artifact()
    assert artifact is not None and artifact.digest == fields["digest"] and artifact.url == fields["url"]
    # and the URL in the status serves the bytes with that digest
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http, \
            http.get(artifact.url) as resp:
        assert resp.status == 200 and len(await resp.read()) == fields["size"]


async def test_new_revision_replaces_the_artifact_and_keeps_transition_time(
    cluster: Any, kube: KubeClient, artifacts: ArtifactServer
) -> None:
    clock = FakeClock(start=datetime(2026, 1, 1, tzinfo=UTC))
    first = await artifacts.publish_files(FILES, name="app", metadata={"old": "1"})
    await publish_source(kube, namespace=cluster.namespace, name="app", artifact=first, clock=clock)
    await clock.advance(60)
    second = await artifacts.publish_files({**FILES, "app/extra.yaml": "a: 1\n"}, name="app")
    updated = await publish_source(kube, namespace=cluster.namespace, name="app", artifact=second, clock=clock)
    assert updated["status"]["artifact"] == second  # metadata key "old" is gone, not merged
    ready = condition(updated, "Ready")
    assert ready["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert ready["message"] == f"stored artifact for revision '{second['revision']}'"


async def test_not_ready_keeps_the_artifact_then_recovers(
    cluster: Any, kube: KubeClient, artifacts: ArtifactServer
) -> None:
    fields = await artifacts.publish_files(FILES, name="app")
    await publish_source(kube, namespace=cluster.namespace, name="app", artifact=fields)
    failed = await set_source_not_ready(kube, namespace=cluster.namespace, name="app",
                                       reason="GitOperationFailed", message="failed to checkout")
    ready = condition(failed, "Ready")
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "GitOperationFailed",
                                                                    "failed to checkout")
    assert failed["status"]["artifact"] == fields
    assert condition(failed, "ArtifactInStorage")["status"] == "True"
    assert not parse_source(failed).is_ready()
    recovered = await publish_source(kube, namespace=cluster.namespace, name="app", artifact=fields)
    assert parse_source(recovered).is_ready()


async def test_remove_artifact_leaves_conditions(cluster: Any, kube: KubeClient, artifacts: ArtifactServer) -> None:
    fields = await artifacts.publish_files(FILES, name="app")
    await publish_source(kube, namespace=cluster.namespace, name="app", artifact=fields)
    removed = await remove_artifact(kube, namespace=cluster.namespace, name="app")
    assert "artifact" not in removed["status"]
    assert condition(removed, "Ready")["status"] == "True"
    assert parse_source(removed).get_artifact() is None


@pytest.mark.parametrize("kind", ["OCIRepository", "Bucket", "ExternalArtifact"])
async def test_every_source_kind(cluster: Any, kube: KubeClient, artifacts: ArtifactServer, kind: str) -> None:
    fields = await artifacts.publish_files(FILES, name=kind.lower(), revision="latest@sha256:" + "b" * 64)
    await publish_source(kube, kind=kind, namespace=cluster.namespace, name="src", artifact=fields)
    stored = await kube.get(SOURCE_API_VERSION, kind, "src", cluster.namespace)
    assert stored["status"]["artifact"]["revision"] == "latest@sha256:" + "b" * 64
    assert ("observedGeneration" in stored["status"]) is (kind != "ExternalArtifact")
    assert parse_source(stored).is_ready()


async def test_existing_spec_is_left_alone(cluster: Any, kube: KubeClient, artifacts: ArtifactServer) -> None:
    spec = {"interval": "5m", "url": "https://github.com/stefanprodan/podinfo", "ref": {"tag": "6.7.0"}}
    fields = await artifacts.publish_files(FILES, name="app")
    await publish_source(kube, namespace=cluster.namespace, name="podinfo", artifact=fields, spec=spec)
    await publish_source(kube, namespace=cluster.namespace, name="podinfo", artifact=fields,
                         spec={"interval": "1m", "url": "https://example.com/other"})
    stored = await kube.get(SOURCE_API_VERSION, "GitRepository", "podinfo", cluster.namespace)
    assert stored["spec"]["url"] == spec["url"] and stored["spec"]["ref"] == {"tag": "6.7.0"}


async def test_helpers_on_a_missing_source_name_it(cluster: Any, kube: KubeClient) -> None:
    with pytest.raises(NotFoundError) as err:
        await set_source_not_ready(kube, namespace=cluster.namespace, name="missing", message="x")
    assert "missing" in str(err.value)
    with pytest.raises(NotFoundError):
        await remove_artifact(kube, namespace=cluster.namespace, name="missing")
