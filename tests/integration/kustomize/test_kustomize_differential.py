"""Differential corpus: with no spec overlay, our pipeline renders exactly what ``kustomize build`` does."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kustomize_controller.kustomize.build import BuilderCommand
from kustomize_controller.kustomize.pipeline import BuildOptions, BuildPipeline

from .conftest import DATA

pytestmark = pytest.mark.builder

CASES = sorted(p for p in (DATA / "differential").iterdir() if p.is_dir())


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 15


def reference_build(command: BuilderCommand, directory: Path) -> str:
    """The oracle: the builder run directly, with its default (root-only) load restrictor."""
    res = subprocess.run([*command.argv, str(directory)], capture_output=True, text=True, check=False, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_pipeline_matches_kustomize(
    case: Path, builder_command: BuilderCommand, pipeline: BuildPipeline, tmp_path: Path
) -> None:
    entry = (case / "ENTRY").read_text().strip()
    pristine = tmp_path / "pristine"
    shutil.copytree(case, pristine)
    expected = reference_build(builder_command, pristine / entry)
    expected_objects = [d for d in yaml.safe_load_all(expected) if d is not None]

    async with pipeline.local_checkout(case, path=entry) as checkout:
        result = await pipeline.build(checkout, BuildOptions(path=entry, allow_remote_bases=False))

    assert result.objects == expected_objects
    assert result.render() == expected
    assert (case / entry / "kustomization.yaml").read_text() == (pristine / entry / "kustomization.yaml").read_text()
