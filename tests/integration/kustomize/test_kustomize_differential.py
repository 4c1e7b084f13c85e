"""Differential corpus: with no spec overlay, our pipeline renders exactly what kustomize does.

The oracle is the builder run directly on a pristine copy. Flux runs kustomize's Go API with the
reorder option unset — input order unless the kustomization sets ``sortOptions`` — while the CLIs
default to the legacy kind order, so the oracle's top-level kustomization gets
``sortOptions: {order: fifo}`` when it has none (byte equality), and the plain CLI output must
hold the same objects (set equality).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kustomize_controller.kustomize.build import BuilderCommand
from kustomize_controller.kustomize.pipeline import BuildOptions, BuildPipeline

from .conftest import DATA, Open

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
    case: Path, builder_command: BuilderCommand, pipeline: BuildPipeline, open_source: Open, tmp_path: Path
) -> None:
    entry = (case / "ENTRY").read_text().strip()
    pristine = tmp_path / "pristine"
    shutil.copytree(case, pristine)
    legacy = [d for d in yaml.safe_load_all(reference_build(builder_command, pristine / entry)) if d is not None]
    kfile = pristine / entry / "kustomization.yaml"
    kus = yaml.safe_load(kfile.read_text())
    kus.setdefault("sortOptions", {"order": "fifo"})
    kfile.write_text(yaml.safe_dump(kus))
    expected = reference_build(builder_command, pristine / entry)
    expected_objects = [d for d in yaml.safe_load_all(expected) if d is not None]

    async with open_source(case, path=entry) as checkout:
        result = await pipeline.build(checkout, BuildOptions(path=entry, allow_remote_bases=False))

    assert result.objects == expected_objects
    assert result.render() == expected
    assert sorted(map(key, result.objects)) == sorted(map(key, legacy))
    assert "sortOptions" not in (case / entry / "kustomization.yaml").read_text()  # the source is untouched


def key(obj: dict[str, Any]) -> str:
    return yaml.safe_dump(obj, sort_keys=True)
