"""Trying to fool the build cache, with the real builder: every input that can change a build's output
must lead to a rebuild, builds never see each other's writes, and a reused build equals a fresh one."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kustomize_controller.kustomize.artifact_cache import ArtifactCache
from kustomize_controller.kustomize.build import BuilderCommand, KustomizeBuilder
from kustomize_controller.kustomize.build_cache import BuildCache
from kustomize_controller.kustomize.errors import DecryptionError, KustomizeError, PathNotFoundError
from kustomize_controller.kustomize.extract import Workspace
from kustomize_controller.kustomize.fetch import ArtifactFetcher
from kustomize_controller.kustomize.pipeline import BuildOptions, BuildPipeline, BuildResult, Decryptor
from kustomize_controller.kustomize.sops.decryptor import SopsDecryptor
from kustomize_controller.runtime.clock import FakeClock, RealClock
from kustomize_controller.testing.artifacts import ArtifactFields, ArtifactServer

pytestmark = pytest.mark.builder

SOPS_DATA = Path(__file__).resolve().parents[3].parent / "shared" / "reference" / "testdata" / "sops"


def cm(name: str, value: str = "v") -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  key: {value}\n"


DEPLOY = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx:1.0}]
"""

# One overlay that reads every kind of file the confinement walk knows about.
REPO: dict[str, str] = {
    "base/kustomization.yaml": "resources: [deploy.yaml, cm.yaml]\n",
    "base/deploy.yaml": DEPLOY,
    "base/cm.yaml": cm("base"),
    "components/extra/kustomization.yaml": (
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [extra.yaml]\n"
    ),
    "components/extra/extra.yaml": cm("extra"),
    "app/kustomization.yaml": (
        "resources: [../base, local.yaml]\n"
        "components: [../components/extra]\n"
        "patches:\n- path: patch.yaml\n"
        "configMapGenerator:\n- name: gen\n  files: [data.txt]\n  envs: [vars.env]\n"
        "replacements:\n- path: replacement.yaml\n"
    ),
    "app/local.yaml": cm("local", "${GREETING:=hello}"),
    "app/patch.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n",
    "app/data.txt": "data",
    "app/vars.env": "A=1\n",
    "app/replacement.yaml": (
        "source: {kind: ConfigMap, name: base, fieldPath: data.key}\n"
        "targets:\n- select: {kind: ConfigMap, name: local}\n  fieldPaths: [metadata.annotations.copied]\n"
        "  options: {create: true}\n"
    ),
    "unrelated/cm.yaml": cm("unrelated"),
}


class CountingBuilder:
    """The real builder, counted, with an identity a test can change."""

    def __init__(self, inner: KustomizeBuilder) -> None:
        self.inner = inner
        self.runs = 0
        self.identity_suffix = ""

    def cache_identity(self) -> str:
        return self.inner.cache_identity() + self.identity_suffix

    async def build(self, directory: Path, *, root: Path, workdir: Path, allow_remote: bool,
                    batch: object = None) -> bytes:
        self.runs += 1
        return await self.inner.build(directory, root=root, workdir=workdir, allow_remote=allow_remote)


@dataclass
class Env:
    server: ArtifactServer
    builder: CountingBuilder
    pipeline: BuildPipeline
    fresh: BuildPipeline
    workspace: Path
    variables: dict[str, dict[str, str]] = field(default_factory=lambda: {"ConfigMap/vars": {}})
    revisions: int = 0

    async def publish(self, files: Mapping[str, str]) -> ArtifactFields:
        self.revisions += 1
        return await self.server.publish_files(files, name=f"repo{self.revisions}")

    async def var_source(self, kind: str, name: str) -> Mapping[str, str] | None:
        return self.variables.get(f"{kind}/{name}")

    async def build(self, artifact: ArtifactFields, spec: dict[str, Any], *, decryptor: Decryptor | None = None,
                    pipeline: BuildPipeline | None = None, **kw: Any) -> BuildResult:
        options = BuildOptions.from_spec(spec, **kw)
        async with (pipeline or self.pipeline).checkout(
            url=artifact["url"], digest=artifact["digest"], path=options.path
        ) as checkout:
            return await (pipeline or self.pipeline).build(
                checkout, options, decryptor=decryptor, var_source=self.var_source
            )

    async def check(self, artifact: ArtifactFields, spec: dict[str, Any], *, rebuilt: bool, **kw: Any) -> BuildResult:
        """Build through the caches; compare with an uncached build; check whether kustomize ran."""
        before = self.builder.runs
        result = await self.build(artifact, spec, **kw)
        assert self.builder.runs == before + (1 if rebuilt else 0), "kustomize runs"
        assert result.reused is not rebuilt
        fresh = await self.build(artifact, spec, pipeline=self.fresh, **kw)
        assert result.objects == fresh.objects and result.digest == fresh.digest
        return result


@pytest.fixture
async def env(tmp_path: Path, builder_command: BuilderCommand) -> AsyncIterator[Env]:
    async with ArtifactServer() as server, aiohttp.ClientSession() as session:
        fetcher = ArtifactFetcher(session=session, clock=FakeClock(), env={}, retries=0)
        workspace = Workspace(tmp_path / "ws")
        builder = CountingBuilder(KustomizeBuilder(command=builder_command, clock=RealClock()))
        artifacts = ArtifactCache(workspace=workspace, fetcher=fetcher)
        pipeline = BuildPipeline(
            builder=builder, workspace=workspace, fetcher=fetcher, artifacts=artifacts, builds=BuildCache()
        )
        fresh = BuildPipeline(builder=builder.inner, workspace=workspace, fetcher=fetcher)
        try:
            yield Env(server, builder, pipeline, fresh, tmp_path / "ws")
        finally:
            await artifacts.close()


APP = {"path": "app", "postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "vars"}]}}


async def test_unchanged_inputs_are_reused_as_fresh_objects(env: Env) -> None:
    artifact = await env.publish(REPO)
    first = await env.check(artifact, APP, rebuilt=True)
    first.objects[0]["metadata"]["name"] = "mutated by the apply path"
    before = set(env.workspace.iterdir())
    async with env.pipeline.checkout(url=artifact["url"], digest=artifact["digest"], path="app") as co:
        assert (await env.pipeline.build(co, BuildOptions.from_spec(APP), var_source=env.var_source)).reused
        assert set(env.workspace.iterdir()) == before  # a reused build makes no temp dir
    second = await env.check(artifact, APP, rebuilt=False)
    assert second.objects[0]["metadata"]["name"] != "mutated by the apply path"
    # A new revision that changes nothing this build reads: still reused.
    unrelated = await env.publish({**REPO, "unrelated/cm.yaml": cm("unrelated", "changed")})
    await env.check(unrelated, APP, rebuilt=False)


@pytest.mark.parametrize(
    "changed",
    ["base/deploy.yaml", "base/cm.yaml", "base/kustomization.yaml", "components/extra/extra.yaml",
     "app/kustomization.yaml", "app/local.yaml", "app/patch.yaml", "app/data.txt", "app/vars.env",
     "app/replacement.yaml"],
)
async def test_a_change_in_any_reachable_file_rebuilds(env: Env, changed: str) -> None:
    await env.check(await env.publish(REPO), APP, rebuilt=True)
    edits = {
        "base/kustomization.yaml": "resources: [deploy.yaml, cm.yaml]\nnamePrefix: b-\n",
        "app/kustomization.yaml": REPO["app/kustomization.yaml"] + "nameSuffix: -s\n",
        "app/replacement.yaml": REPO["app/replacement.yaml"].replace("copied", "copied2"),
        "base/deploy.yaml": DEPLOY.replace("nginx:1.0", "nginx:2.0"),
        "app/patch.yaml": REPO["app/patch.yaml"].replace("replicas: 2", "replicas: 3"),
    }
    edits.update({
        "base/cm.yaml": cm("base", "w"),
        "components/extra/extra.yaml": cm("extra", "w"),
        "app/local.yaml": cm("local", "${GREETING:=howdy}"),
        "app/data.txt": "other data",
        "app/vars.env": "A=2\n",
    })
    content = edits[changed]
    assert content != REPO[changed]
    result = await env.check(await env.publish({**REPO, changed: content}), APP, rebuilt=True)
    assert result.objects  # the new output, equal to an uncached build of the new revision (checked above)


async def test_new_files_next_to_a_generated_kustomization_rebuild(env: Env) -> None:
    files = {"plain/a.yaml": cm("a")}
    await env.check(await env.publish(files), {"path": "plain"}, rebuilt=True)
    result = await env.check(await env.publish({**files, "plain/b.yaml": cm("b")}), {"path": "plain"}, rebuilt=True)
    assert {o["metadata"]["name"] for o in result.objects} == {"a", "b"}
    # A non-manifest file is not read by generation: reused.
    await env.check(await env.publish({**files, "plain/b.yaml": cm("b"), "plain/README": "x"}), {"path": "plain"},
                    rebuilt=False)


async def test_a_substituted_configmap_value_change_rebuilds(env: Env) -> None:
    artifact = await env.publish(REPO)
    env.variables["ConfigMap/vars"] = {"GREETING": "hi"}
    result = await env.check(artifact, APP, rebuilt=True)
    assert any((o.get("data") or {}).get("key") == "hi" for o in result.objects)
    await env.check(artifact, APP, rebuilt=False)
    env.variables["ConfigMap/vars"] = {"GREETING": "bye"}
    result = await env.check(artifact, APP, rebuilt=True)
    assert any((o.get("data") or {}).get("key") == "bye" for o in result.objects)


async def test_unreadable_variables_are_reported_by_the_build_and_never_cached(env: Env) -> None:
    artifact = await env.publish(REPO)
    del env.variables["ConfigMap/vars"]
    with pytest.raises(KustomizeError, match="substitute from 'ConfigMap/vars' error"):
        await env.build(artifact, APP)
    env.variables["ConfigMap/vars"] = {"GREETING": "hi"}
    await env.check(artifact, APP, rebuilt=True)


SPEC_CHANGES: list[dict[str, Any]] = [
    {"targetNamespace": "other"},
    {"namePrefix": "p-"},
    {"nameSuffix": "-s"},
    {"images": [{"name": "nginx", "newTag": "9.9"}]},
    {"patches": [{"patch": "- op: add\n  path: /metadata/labels\n  value: {x: y}\n",
                  "target": {"kind": "Deployment"}}]},
    {"components": ["../components/extra"]},
    {"commonMetadata": {"labels": {"team": "a"}}},
    {"postBuild": {"substitute": {"GREETING": "inline"}}},
    {"path": "base"},
]


@pytest.mark.parametrize("change", SPEC_CHANGES, ids=[next(iter(c)) for c in SPEC_CHANGES])
async def test_a_spec_field_change_rebuilds(env: Env, change: dict[str, Any]) -> None:
    artifact = await env.publish({**REPO, "app/kustomization.yaml": "resources: [../base, local.yaml]\n"})
    spec = {"path": "app"}
    await env.check(artifact, spec, rebuilt=True)
    await env.check(artifact, {**spec, **change}, rebuilt=True)
    await env.check(artifact, {**spec, **change}, rebuilt=False)


async def test_build_changing_flags_rebuild(env: Env) -> None:
    artifact = await env.publish(REPO)
    spec = {**APP, "postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "vars"}],
                                 "substitute": {"UNUSED": "x"}}}
    await env.check(artifact, spec, rebuilt=True)
    await env.check(artifact, spec, rebuilt=True, no_remote_bases=True)
    await env.check(artifact, spec, rebuilt=True, no_remote_bases=True, strict_substitution=False)
    await env.check(artifact, spec, rebuilt=False, no_remote_bases=True, strict_substitution=False)


async def test_a_kustomize_binary_change_rebuilds(env: Env) -> None:
    artifact = await env.publish(REPO)
    await env.check(artifact, APP, rebuilt=True)
    env.builder.identity_suffix = "|another binary"
    await env.check(artifact, APP, rebuilt=True)


def test_the_builder_identity_follows_the_binary_file(tmp_path: Path) -> None:
    binary = tmp_path / "kustomize"
    binary.write_text("#!/bin/sh\n")
    command = BuilderCommand(argv=(str(binary), "build"), flavour="kustomize", version="v5.8.1",
                             kustomize_version="v5.8.1")
    builder = KustomizeBuilder(command=command, clock=RealClock())
    before = builder.cache_identity()
    assert builder.cache_identity() == before
    binary.write_text("#!/bin/sh\n# a new release\n")
    assert builder.cache_identity() != before
    other = KustomizeBuilder(command=BuilderCommand(command.argv, "kustomize", "v5.9.0", "v5.9.0"), clock=RealClock())
    assert other.cache_identity() != builder.cache_identity()


async def test_two_overlays_on_one_path_never_share_output(env: Env) -> None:
    artifact = await env.publish(REPO)

    async def names(prefix: str) -> set[str]:
        result = await env.build(artifact, {**APP, "namePrefix": prefix})
        return {o["metadata"]["name"] for o in result.objects}

    for _ in range(2):
        one, two = await asyncio.gather(names("one-"), names("two-"))
        assert all(n.startswith("one-") for n in one) and all(n.startswith("two-") for n in two)
    assert env.builder.runs == 2


async def test_concurrent_builds_of_one_artifact_download_it_once(env: Env) -> None:
    files = {f"apps/a{i}/cm.yaml": cm(f"a{i}") for i in range(8)}
    artifact = await env.publish(files)
    results = await asyncio.gather(*(env.build(artifact, {"path": f"apps/a{i}"}) for i in range(8)))
    assert [r.objects[0]["metadata"]["name"] for r in results] == [f"a{i}" for i in range(8)]
    assert env.server.request_count(str(artifact["path"])) == 1


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.mark.skipif(not SOPS_DATA.is_dir(), reason="shared SOPS test data missing")
async def test_decryption_never_leaks_and_a_key_change_rebuilds(env: Env) -> None:
    keys = SOPS_DATA / "keys"
    age, pgp = (keys / "age.txt").read_bytes(), (keys / "pgp.asc").read_bytes()
    artifact = await env.server.publish_dir(SOPS_DATA, name="sops")
    before = env.builder.runs
    with SopsDecryptor.from_secret_data({"age.agekey": age, "pgp.asc": pgp}) as dec:
        decrypted = await env.build(artifact, {"path": "envs"}, decryptor=dec)
    with SopsDecryptor.from_secret_data({"age.agekey": age, "pgp.asc": pgp}) as dec:
        again = await env.build(artifact, {"path": "envs"}, decryptor=dec)
    assert again.reused and again.objects == decrypted.objects
    assert env.builder.runs == before + 1
    # No decryption: built again from the shared tree, which the first build did not modify.
    plain = await env.build(artifact, {"path": "envs"})
    assert not plain.reused and plain.objects != decrypted.objects
    # Other key material: the build runs again — and fails when the keys no longer decrypt.
    with SopsDecryptor.from_secret_data({"other.agekey": b""}) as dec, pytest.raises(DecryptionError):
        await env.build(artifact, {"path": "envs"}, decryptor=dec)


async def test_a_decryptor_without_identity_is_never_cached(env: Env) -> None:
    class Anonymous:
        def decrypt_sources(self, root: Path, kustomization_dir: Path) -> None:
            pass

        def decrypt_object(self, obj: dict[str, Any]) -> dict[str, Any]:
            return obj

    artifact = await env.publish({"plain/a.yaml": cm("a")})
    for _ in range(2):
        result = await env.build(artifact, {"path": "plain"}, decryptor=Anonymous())
        assert not result.reused
    assert env.builder.runs == 2


async def test_writes_of_a_build_never_reach_the_shared_tree(env: Env) -> None:
    class InPlace:
        """Decrypts ``secret.env`` in place, like SOPS does."""

        cache_identity = "in-place"

        def decrypt_sources(self, root: Path, kustomization_dir: Path) -> None:
            target = kustomization_dir / "secret.env"
            target.write_text(target.read_text().replace("ENC", "PLAIN"))

        def decrypt_object(self, obj: dict[str, Any]) -> dict[str, Any]:
            return obj

    files = {"app/kustomization.yaml": "configMapGenerator:\n- name: s\n  envs: [secret.env]\n",
             "app/secret.env": "K=ENC\n", "gen/a.yaml": cm("a")}
    artifact = await env.publish(files)
    async with env.pipeline.checkout(url=artifact["url"], digest=artifact["digest"], path="app") as co:
        assert co.shared is not None
        shared, before = co.shared, tree_digest(co.shared)
        result = await env.pipeline.build(co, BuildOptions(path="app", overlay=BuildOptions.from_spec(
            {"namePrefix": "x-"}).overlay), decryptor=InPlace())
        assert result.objects[0]["data"] == {"K": "PLAIN"}
    plain = await env.build(artifact, {"path": "app"})
    assert plain.objects[0]["data"] == {"K": "ENC"}
    await env.build(artifact, {"path": "gen", "namePrefix": "g-"})  # generated kustomization.yaml
    assert tree_digest(shared) == before
    assert not (shared / "gen" / "kustomization.yaml").exists()


async def test_the_remembered_path_of_an_artifact_never_answers_for_another(env: Env) -> None:
    """spec.path is resolved once per artifact: a missing path is still reported every time, another
    path or another revision is resolved afresh, and a tree extracted again is found again."""
    artifact = await env.publish(REPO)
    for _ in range(2):
        async with env.pipeline.checkout(url=artifact["url"], digest=artifact["digest"], path="./app") as co:
            assert co.directory == co.root / "app" and co.directory.is_dir()
        with pytest.raises(PathNotFoundError, match=r"^kustomization path not found: stat missing: "):
            async with env.pipeline.checkout(url=artifact["url"], digest=artifact["digest"], path="missing"):
                pass
    async with env.pipeline.checkout(url=artifact["url"], digest=artifact["digest"], path="base") as co:
        assert co.directory == co.root / "base"
    # the next revision has no app/ any more: the path known for the previous one is not trusted
    moved = {k.replace("app/", "apps/app/"): v for k, v in REPO.items()}
    revision = await env.publish(moved)
    with pytest.raises(PathNotFoundError, match=r"^kustomization path not found: stat app: "):
        async with env.pipeline.checkout(url=revision["url"], digest=revision["digest"], path="./app"):
            pass
    # a tree removed from disk under us is extracted again and the remembered path joined to it
    async with env.pipeline.checkout(url=artifact["url"], digest=artifact["digest"], path="app") as co:
        root = co.root
    shutil.rmtree(root)
    async with env.pipeline.checkout(url=artifact["url"], digest=artifact["digest"], path="app") as co:
        assert co.directory == co.root / "app" and co.directory.is_dir()
        result = await env.pipeline.build(co, BuildOptions.from_spec(APP), var_source=env.var_source)
    assert result.objects
