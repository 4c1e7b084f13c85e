"""Shared fixtures for tests that run the real kustomize builder (marker ``builder``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from kustomize_controller.kustomize.artifact_cache import ArtifactCache
from kustomize_controller.kustomize.build import BuilderCommand, KustomizeBuilder, detect_builder
from kustomize_controller.kustomize.build_cache import BuildCache
from kustomize_controller.kustomize.errors import BuilderUnavailableError
from kustomize_controller.kustomize.extract import Workspace
from kustomize_controller.kustomize.fetch import ArtifactFetcher
from kustomize_controller.kustomize.pipeline import BuildPipeline, Checkout
from kustomize_controller.runtime.clock import RealClock
from kustomize_controller.testing.artifacts import ArtifactServer

DATA = Path(__file__).resolve().parents[2] / "data" / "kustomize"


@pytest.fixture(scope="session")
def builder_command() -> BuilderCommand:
    try:
        return asyncio.run(detect_builder(clock=RealClock()))
    except BuilderUnavailableError as err:
        pytest.skip(f"no kustomize builder: {err}")


@dataclass
class Variant:
    """A pipeline and how a test's source directory reaches it."""

    pipeline: BuildPipeline
    server: ArtifactServer | None = None  # set: sources are published as artifacts and downloaded

    def checkout(self, source: Path, *, path: str) -> contextlib.AbstractAsyncContextManager[Checkout]:
        if self.server is None:
            return self.pipeline.local_checkout(source, path=path)
        return self._downloaded(self.server, source, path)

    @contextlib.asynccontextmanager
    async def _downloaded(self, server: ArtifactServer, source: Path, path: str) -> AsyncIterator[Checkout]:
        artifact = await server.publish_dir(source, name="source")
        async with self.pipeline.checkout(url=artifact["url"], digest=artifact["digest"], path=path) as checkout:
            yield checkout


Open = Callable[..., contextlib.AbstractAsyncContextManager[Checkout]]


@pytest.fixture(params=["fresh", "cached"])
async def variant(
    request: pytest.FixtureRequest, builder_command: BuilderCommand, tmp_path: Path
) -> AsyncIterator[Variant]:
    """Every builder test runs twice: on a private copy of its source (no caches), and the way the
    controller runs — the source published as an artifact, downloaded once into the artifact cache and
    read through per-build views, with the build cache on."""
    builder = KustomizeBuilder(command=builder_command, clock=RealClock())
    workspace = Workspace(tmp_path / "workspace")
    if request.param == "fresh":
        yield Variant(BuildPipeline(builder=builder, workspace=workspace))
        return
    async with aiohttp.ClientSession() as session, ArtifactServer() as server:
        fetcher = ArtifactFetcher(session=session, clock=RealClock(), env={})
        artifacts = ArtifactCache(workspace=workspace, fetcher=fetcher)
        cached = BuildPipeline(
            builder=builder, workspace=workspace, fetcher=fetcher, artifacts=artifacts, builds=BuildCache()
        )
        yield Variant(cached, server)
        await artifacts.close()


@pytest.fixture
def pipeline(variant: Variant) -> BuildPipeline:
    return variant.pipeline


@pytest.fixture
def open_source(variant: Variant) -> Open:
    """``open_source(source_dir, path=...)``: an async context manager giving the pipeline's checkout."""
    return variant.checkout
