"""Builds sharing one builder process (kustomize/batch.py) give each root exactly its own build's bytes.

Every differential case that may share a process is built alone and then, all together, through the
builder's queue: each output must be byte-for-byte its single build's, and served by the shared
process (not by a fallback). A root whose references kustomize would resolve against another root's
objects, roots whose objects collide, and a broken root are shown to get their own build's output or
error, never another's.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from kustomize_controller.kustomize.batch import split_output, write_wrapper
from kustomize_controller.kustomize.build import BuilderCommand, KustomizeBuilder
from kustomize_controller.kustomize.errors import KustomizeBuildError
from kustomize_controller.kustomize.extract import Workspace
from kustomize_controller.kustomize.generate import Overlay
from kustomize_controller.kustomize.reach import Reach, materialise, reach
from kustomize_controller.runtime.clock import RealClock

from .conftest import DATA

pytestmark = pytest.mark.builder

CASES = sorted(p for p in (DATA / "differential").iterdir() if p.is_dir())


class Root:
    """A build root prepared as the pipeline prepares it: generated kustomization, private view."""

    def __init__(self, source: Path, entry: str, view: Path, overlay: Overlay | None = None) -> None:
        self.found: Reach = reach(source, source / entry, overlay or Overlay(), allow_remote=False)
        materialise(self.found, source, view / "artifact")
        (view / "work").mkdir()
        self.root = Path(os.path.realpath(view / "artifact"))
        self.directory = self.root / entry
        self.workdir = view / "work"

    async def build(self, builder: KustomizeBuilder, *, batch: bool = True) -> bytes:
        return await builder.build(self.directory, root=self.root, workdir=self.workdir, allow_remote=False,
                                   batch=self.found.batch if batch else None)


def make_builder(command: BuilderCommand, tmp_path: Path, *, max_batch: int = 64) -> KustomizeBuilder:
    return KustomizeBuilder(command=command, clock=RealClock(), max_parallel=1, max_batch=max_batch,
                            workspace=Workspace(tmp_path / "workspace"))


def tree(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    root = tmp_path / "sources" / name
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


FILLER = """apiVersion: v1
kind: ServiceAccount
metadata:
  name: filler-{i}
  namespace: fill
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: filler-{i}
  namespace: fill
data:
  who: filler-{i}
"""
OVERLAYS = {"plain": None, "overlaid": Overlay(target_namespace="elsewhere", name_prefix="x-", name_suffix="-y")}


@pytest.mark.parametrize("overlay", OVERLAYS, ids=list(OVERLAYS))
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_a_case_built_with_others_in_one_process_gets_its_own_bytes(
    case: Path, overlay: str, builder_command: BuilderCommand, tmp_path: Path
) -> None:
    root = Root(case, (case / "ENTRY").read_text().strip(), tmp_path / "case", OVERLAYS[overlay])
    if root.found.batch is None:
        pytest.skip("may not share a process (test_what_may_not_share_a_process)")
    fillers = [Root(tree(tmp_path, f"filler{i}", {"kustomization.yaml": "resources: [app.yaml]\n",
                                                  "app.yaml": FILLER.format(i=i)}), ".", tmp_path / f"f{i}")
               for i in range(2)]
    roots = [fillers[0], root, fillers[1]]
    single_builder = make_builder(builder_command, tmp_path / "single", max_batch=1)
    singles = [await r.build(single_builder, batch=False) for r in roots]

    builder = make_builder(builder_command, tmp_path)
    together = await asyncio.gather(*(r.build(builder) for r in roots))

    assert together == singles
    assert builder.batches is not None and builder.batches.groups == 1 and builder.batches.together == 3


async def test_the_whole_corpus_at_once_gets_each_root_its_own_bytes(
    builder_command: BuilderCommand, tmp_path: Path
) -> None:
    """Many cases share object IDs (a collision fails the shared process) and names (parts not
    trusted): whatever the fallbacks, each root gets its own build's bytes, from fewer processes."""
    roots = [Root(case, (case / "ENTRY").read_text().strip(), tmp_path / f"{case.name}-{kind}", overlay)
             for case in CASES for kind, overlay in OVERLAYS.items()]
    batchable = [r for r in roots if r.found.batch is not None]
    assert len(batchable) >= 24
    single_builder = make_builder(builder_command, tmp_path / "single", max_batch=1)
    singles = [await r.build(single_builder, batch=False) for r in batchable]
    builder = make_builder(builder_command, tmp_path)
    together = await asyncio.gather(*(r.build(builder) for r in batchable))
    assert together == singles
    assert builder.batches is not None and builder.batches.groups >= 1


def test_what_may_not_share_a_process(tmp_path: Path) -> None:
    names = {case.name: Root(case, (case / "ENTRY").read_text().strip(), tmp_path / case.name).found.batch
             for case in CASES}
    # JSON 6902 patches (free renames), replacements, custom configurations/CRD name references and
    # openapi schemas (process-global in kustomize) act beyond their root
    assert {n for n, hint in names.items() if hint is None} >= {
        "06-json6902-patch", "13-replacements", "19-openapi-crd-smp"}
    assert sum(hint is not None for hint in names.values()) >= 12
    assert names["10-prefix-suffix"] is not None and names["10-prefix-suffix"].prefixes


DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: apps
spec:
  template:
    spec:
      containers:
      - name: web
        image: web:1
        envFrom:
        - configMapRef:
            name: settings
"""


async def test_a_reference_kustomize_would_resolve_across_roots_is_built_alone(
    builder_command: BuilderCommand, tmp_path: Path
) -> None:
    # A references ConfigMap "settings" that another Kustomization provides; B generates its own
    # "settings" (hash suffix) in the same namespace. Built together, kustomize rewrites A's reference
    # to B's ConfigMap.
    a = tree(tmp_path, "a", {"kustomization.yaml": "resources: [deployment.yaml]\n",
                             "deployment.yaml": DEPLOYMENT})
    b = tree(tmp_path, "b", {"kustomization.yaml": "namespace: apps\nresources: [sa.yaml]\n"
                                                   "configMapGenerator:\n- name: settings\n  literals: [A=1]\n",
                             "sa.yaml": "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: b\n"})
    ra, rb = Root(a, ".", tmp_path / "va"), Root(b, ".", tmp_path / "vb")
    assert ra.found.batch is not None and rb.found.batch is not None

    wrapper = tmp_path / "wrapper"
    wrapper.mkdir()
    write_wrapper(wrapper, [ra.directory, rb.directory], "t0")
    env = {"PATH": "", "HOME": str(wrapper)}
    proc = await asyncio.create_subprocess_exec(*builder_command.argv, str(wrapper), "--load-restrictor",
                                                "LoadRestrictionsNone", stdout=asyncio.subprocess.PIPE, env=env)
    raw, _ = await proc.communicate()
    leaked, _ = split_output(raw, "t0", 2)
    single_builder = make_builder(builder_command, tmp_path / "single", max_batch=1)
    alone_a = await ra.build(single_builder, batch=False)
    assert leaked != alone_a and b"name: settings-" in leaked  # the hazard is real

    builder = make_builder(builder_command, tmp_path)
    assert builder.batches is not None
    out_a, out_b = await asyncio.gather(ra.build(builder), rb.build(builder))
    assert out_a == alone_a and out_b == await rb.build(single_builder, batch=False)
    assert builder.batches.together == 1  # B's part was trusted, A was built again alone


async def test_collisions_and_errors_stay_with_their_root(builder_command: BuilderCommand, tmp_path: Path) -> None:
    good = [tree(tmp_path, f"good{i}", {"kustomization.yaml": "resources: [cm.yaml]\n",
                                        "cm.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n"})
            for i in range(4)]
    twin = tmp_path / "sources" / "twin"
    shutil.copytree(good[1], twin)  # same object as good1: the shared process fails on the collision
    broken = tree(tmp_path, "broken", {"kustomization.yaml": "resources: [missing.yaml]\n"})
    sources = [*good[:2], twin, broken, *good[2:]]
    roots = [Root(s, ".", tmp_path / f"v{i}") for i, s in enumerate(sources)]

    single_builder = make_builder(builder_command, tmp_path / "single", max_batch=1)
    expected: list[bytes | str] = []
    for r in roots:
        try:
            expected.append(await r.build(single_builder, batch=False))
        except KustomizeBuildError as err:
            expected.append(str(err))
    assert isinstance(expected[3], str) and "missing.yaml" in expected[3]

    builder = make_builder(builder_command, tmp_path)
    results = await asyncio.gather(*(r.build(builder) for r in roots), return_exceptions=True)
    assert [r if isinstance(r, bytes) else str(r) for r in results] == expected
