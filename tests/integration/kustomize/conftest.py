"""Shared fixtures for tests that run the real kustomize builder (marker ``builder``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from kustomize_controller.kustomize.artifact_cache import ArtifactCache
from kustomize_controller.kustomize.build import BuilderCommand, KustomizeBuilder, detect_builder
from kustomize_controller.kustomize.build_cache import BuildCache
from kustomize_controller.kustomize.errors import BuilderUnavailableError
from kustomize_controller.kustomize.extract import Workspace
from kustomize_controller.kustomize.fetch import ArtifactFetcher
from kustomize_controller.kustomize.pipeline import BuildPipeline
from kustomize_controller.runtime.clock import RealClock

DATA = Path(__file__).resolve().parents[2] / "data" / "kustomize"


@pytest.fixture(scope="session")
def builder_command() -> BuilderCommand:
    try:
        return asyncio.run(detect_builder(clock=RealClock()))
    except BuilderUnavailableError as err:
        pytest.skip(f"no kustomize builder: {err}")


@pytest.fixture(params=["fresh", "cached"])
async def pipeline(
    request: pytest.FixtureRequest, builder_command: BuilderCommand, tmp_path: Path
) -> AsyncIterator[BuildPipeline]:
    """Every builder test runs twice: on a private copy (no caches), and the way the controller
    runs — the source read as a shared tree through per-build views, with the build cache on."""
    builder = KustomizeBuilder(command=builder_command, clock=RealClock())
    workspace = Workspace(tmp_path / "workspace")
    if request.param == "fresh":
        yield BuildPipeline(builder=builder, workspace=workspace)
        return
    async with aiohttp.ClientSession() as session:
        fetcher = ArtifactFetcher(session=session, clock=RealClock(), env={})
        artifacts = ArtifactCache(workspace=workspace, fetcher=fetcher)
        yield BuildPipeline(
            builder=builder, workspace=workspace, fetcher=fetcher, artifacts=artifacts, builds=BuildCache()
        )
        await artifacts.close()
