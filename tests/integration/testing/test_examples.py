"""``examples/``: the demo `make run` publishes builds through the controller's pipeline and applies cleanly."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from ruamel.yaml import YAML

from kustomize_controller.api.kustomization import parse_kustomization
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.kustomize.build import BuilderCommand, KustomizeBuilder, detect_builder
from kustomize_controller.kustomize.errors import BuilderUnavailableError
from kustomize_controller.kustomize.extract import Workspace
from kustomize_controller.kustomize.fetch import ArtifactFetcher
from kustomize_controller.kustomize.pipeline import BuildOptions, BuildPipeline
from kustomize_controller.runtime.clock import RealClock
from kustomize_controller.testing.artifacts import ArtifactServer, pack_dir, publish_source

pytestmark = [pytest.mark.integration, pytest.mark.builder]

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def load(path: Path) -> dict[str, Any]:
    doc = YAML(typ="safe").load(path.read_text())
    assert isinstance(doc, dict)
    return doc


@pytest.fixture(scope="module")
def builder_command() -> BuilderCommand:
    try:
        return asyncio.run(detect_builder(clock=RealClock()))
    except BuilderUnavailableError as err:
        pytest.skip(f"no kustomize builder: {err}")


@pytest.fixture
async def pipeline(builder_command: BuilderCommand, tmp_path: Path) -> AsyncIterator[BuildPipeline]:
    async with aiohttp.ClientSession() as http:
        fetcher = ArtifactFetcher(session=http, clock=RealClock(), retries=0)
        builder = KustomizeBuilder(command=builder_command, clock=RealClock())
        yield BuildPipeline(builder=builder, workspace=Workspace(tmp_path / "ws"), fetcher=fetcher)


def test_the_kustomization_make_run_creates() -> None:
    ks = parse_kustomization(load(EXAMPLES / "kustomization.yaml"), strict=True)
    spec = ks.spec
    assert (ks.metadata.namespace, spec.path, spec.prune, spec.wait) == ("flux-system", "./podinfo", True, True)
    assert (spec.interval, spec.timeout) == ("1m", "1m")
    assert (spec.source_ref.kind, spec.source_ref.name) == ("GitRepository", "examples")
    source = load(EXAMPLES / "gitrepository.yaml")
    assert (source["kind"], source["metadata"]) == ("GitRepository", {"name": "examples", "namespace": "flux-system"})
    assert source["spec"]["suspend"] is True


def test_packing_the_examples_is_reproducible() -> None:
    assert pack_dir(EXAMPLES) == pack_dir(EXAMPLES)


async def test_published_examples_build_and_apply(cluster: Any, pipeline: BuildPipeline) -> None:
    spec = load(EXAMPLES / "kustomization.yaml")["spec"] | {"targetNamespace": cluster.namespace}
    async with ArtifactServer() as server:
        artifact = await server.publish_dir(EXAMPLES, name="gitrepository/flux-system/examples")
        client = KubeClient(config=await load_kubeconfig(cluster.kubeconfig_path))
        try:
            await publish_source(client, namespace=cluster.namespace, name="examples", artifact=artifact)
            result = await pipeline.run(url=artifact["url"], digest=artifact["digest"],
                                        options=BuildOptions.from_spec(spec))
            kinds = sorted(f"{o['kind']}/{o['metadata']['name']}" for o in result.objects)
            assert kinds == ["ConfigMap/podinfo-config", "Deployment/podinfo", f"Namespace/{cluster.namespace}",
                             "Service/podinfo", "ServiceAccount/podinfo"]
            for obj in result.objects:
                assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "podinfo-demo"
                applied = await client.apply(obj, field_manager="kustomize-controller")
                assert applied["metadata"]["uid"]
            deployment = await client.get("apps/v1", "Deployment", "podinfo", cluster.namespace)
            image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
            assert image == "ghcr.io/stefanprodan/podinfo:6.7.1"
        finally:
            await client.close()
