"""Shared fixtures for tests that run the real kustomize builder (marker ``builder``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kustomize_controller.kustomize.build import BuilderCommand, KustomizeBuilder, detect_builder
from kustomize_controller.kustomize.errors import BuilderUnavailableError
from kustomize_controller.kustomize.extract import Workspace
from kustomize_controller.kustomize.pipeline import BuildPipeline
from kustomize_controller.runtime.clock import RealClock

DATA = Path(__file__).resolve().parents[2] / "data" / "kustomize"


@pytest.fixture(scope="session")
def builder_command() -> BuilderCommand:
    try:
        return asyncio.run(detect_builder(clock=RealClock()))
    except BuilderUnavailableError as err:
        pytest.skip(f"no kustomize builder: {err}")


@pytest.fixture
async def pipeline(builder_command: BuilderCommand, tmp_path: Path) -> AsyncIterator[BuildPipeline]:
    builder = KustomizeBuilder(command=builder_command, clock=RealClock())
    yield BuildPipeline(builder=builder, workspace=Workspace(tmp_path / "workspace"))
