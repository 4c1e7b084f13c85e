"""Attack corpus, end to end through download → extract → build with the real builder.

Each malicious artifact must be refused with a clear error, the secret outside the artifact must
never show up in an error or output, and nothing may be written outside the workspace.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import subprocess
import tarfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from kustomize_controller.kustomize.artifact_cache import ArtifactCache
from kustomize_controller.kustomize.build import BuilderCommand, KustomizeBuilder
from kustomize_controller.kustomize.build_cache import BuildCache
from kustomize_controller.kustomize.errors import (
    ArtifactTooLargeError,
    ConfinementError,
    DigestError,
    ExtractError,
    KustomizeBuildError,
    KustomizeError,
)
from kustomize_controller.kustomize.extract import Workspace
from kustomize_controller.kustomize.fetch import ArtifactFetcher
from kustomize_controller.kustomize.pipeline import BuildOptions, BuildPipeline
from kustomize_controller.runtime.clock import FakeClock, RealClock
from tests.archives import targz
from tests.loopback import serve, serve_blobs

pytestmark = pytest.mark.builder

SECRET = "SERVICE-ACCOUNT-TOKEN-7f3a"
CM = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\n"


@dataclass
class Env:
    url: str
    blobs: dict[str, bytes]
    outside: Path
    tmp: Path
    pipeline: BuildPipeline
    artifacts: ArtifactCache | None = None


@pytest.fixture(params=["fresh", "cached"])
async def env(request: pytest.FixtureRequest, tmp_path: Path, builder_command: BuilderCommand) -> AsyncIterator[Env]:
    """Each attack runs against a private extraction and through the artifact and build caches
    (which must be exactly as strict); the cache keeps no tree once unused, so nothing may stay."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "token").write_text(SECRET)
    (outside / "kustomization.yaml").write_text("configMapGenerator:\n- name: stolen\n  files: [token]\n")
    blobs: dict[str, bytes] = {}
    runner, url = await serve(serve_blobs(blobs))
    async with aiohttp.ClientSession() as session:
        fetcher = ArtifactFetcher(session=session, clock=FakeClock(), env={}, retries=0, max_size=1 << 20)
        workspace = Workspace(tmp_path / "workspace")
        artifacts = None
        if request.param == "cached":
            artifacts = ArtifactCache(workspace=workspace, fetcher=fetcher, max_bytes=0, max_extract_bytes=4 << 20)
        pipeline = BuildPipeline(
            builder=KustomizeBuilder(command=builder_command, clock=RealClock()),
            workspace=workspace,
            fetcher=fetcher,
            max_extract_bytes=4 << 20,
            artifacts=artifacts,
            builds=BuildCache() if artifacts is not None else None,
        )
        try:
            yield Env(url, blobs, outside, tmp_path, pipeline, artifacts)
        finally:
            if artifacts is not None:
                await artifacts.close()
            await runner.cleanup()


def leftovers(env: Env) -> list[Path]:
    """What the workspace holds besides the (empty) artifact cache directory."""
    cache_dir = env.artifacts.directory if env.artifacts is not None else None
    found = [p for p in (env.tmp / "workspace").iterdir() if p != cache_dir]
    if cache_dir is not None and cache_dir.exists():
        found.extend(cache_dir.iterdir())
    return found


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and "workspace" not in p.parts
    }


async def attempt(env: Env, blob: bytes, *, digest: str | None = None, no_remote: bool = True,
                  path: str = "app") -> KustomizeError:
    env.blobs["/a.tgz"] = blob
    before = snapshot(env.tmp)
    digest = digest or "sha256:" + hashlib.sha256(blob).hexdigest()
    with pytest.raises(KustomizeError) as err:
        await env.pipeline.run(
            url=f"{env.url}/a.tgz", digest=digest,
            options=BuildOptions(path=path, allow_remote_bases=not no_remote),
        )
    assert snapshot(env.tmp) == before, "something was written outside the workspace"
    assert leftovers(env) == []
    assert SECRET not in str(err.value)
    return err.value


def app(kustomization: str, **extra: bytes) -> dict[str, bytes | tuple[bytes, str]]:
    files: dict[str, bytes | tuple[bytes, str]] = {"app/kustomization.yaml": kustomization.encode(), "app/cm.yaml": CM}
    files.update({f"app/{k}": v for k, v in extra.items()})
    return files


def out(env: Env, rel: str = "token") -> str:
    return str(env.outside / rel)


@pytest.mark.parametrize(
    ("name", "kustomization"),
    [
        ("generator-files-outside", "configMapGenerator:\n- name: x\n  files: [{token}]\n"),
        ("generator-envs-outside", "secretGenerator:\n- name: x\n  envs: [{token}]\n"),
        ("generator-env-outside", "configMapGenerator:\n- name: x\n  env: {token}\n"),
        ("resources-etc", "resources: [/etc/passwd]\n"),
        ("resources-dotdot-beyond-root", "resources: [../../../../../../../../..{outside}]\n"),
        ("openapi-path-outside", "resources: [cm.yaml]\nopenapi:\n  path: {token}\n"),
        ("replacement-path-outside", "resources: [cm.yaml]\nreplacements:\n- path: {token}\n"),
        (
            "transformer-path-outside",
            "resources: [cm.yaml]\ntransformers:\n- |\n  apiVersion: builtin\n  kind: PatchTransformer\n"
            "  metadata: {{name: p}}\n  path: {token}\n",
        ),
        ("patch-path-outside", "resources: [cm.yaml]\npatches:\n- path: {token}\n"),
        ("crds-outside", "resources: [cm.yaml]\ncrds: [{token}]\n"),
    ],
)
async def test_local_escapes_are_refused(env: Env, name: str, kustomization: str) -> None:
    text = kustomization.format(token=out(env), outside=env.outside)
    err = await attempt(env, targz(app(text)))
    assert isinstance(err, ConfinementError), err
    assert err.reason == "BuildFailed"
    assert str(err).startswith("app/kustomization.yaml: '")


def test_the_builder_alone_would_leak(tmp_path: Path, builder_command: BuilderCommand) -> None:
    """Why confinement exists: LoadRestrictionsNone happily reads the token into a ConfigMap."""
    (tmp_path / "token").write_text(SECRET)
    work = tmp_path / "direct"
    work.mkdir()
    (work / "kustomization.yaml").write_text(f"configMapGenerator:\n- name: x\n  files: [{tmp_path}/token]\n")
    res = subprocess.run([*builder_command.argv, str(work), "--load-restrictor", "LoadRestrictionsNone"],
                         capture_output=True, text=True, check=False, timeout=120)
    assert SECRET in res.stdout


async def test_remote_base_refused_under_no_remote_bases(env: Env) -> None:
    text = "resources:\n- https://github.com/fluxcd/flux2-kustomize-helm-example//apps/base?ref=main\n"
    err = await attempt(env, targz(app(text)))
    assert isinstance(err, ConfinementError)
    assert "remote bases are disabled" in str(err)


async def test_symlinked_dir_in_tarball_is_dropped_not_followed(env: Env) -> None:
    files = app("resources: [../linked]\n")
    files["linked"] = (tarfile.SYMTYPE, str(env.outside))
    err = await attempt(env, targz(files))
    assert isinstance(err, KustomizeBuildError)  # the link was skipped: kustomize finds nothing there


async def test_symlinked_file_in_tarball_is_dropped_not_followed(env: Env) -> None:
    files = app("configMapGenerator:\n- name: x\n  files: [token]\n")
    files["app/token"] = (tarfile.SYMTYPE, out(env))
    files["app/hard"] = (tarfile.LNKTYPE, out(env))
    err = await attempt(env, targz(files))
    assert isinstance(err, KustomizeBuildError)


@pytest.mark.parametrize(
    ("member", "message"),
    [("../../escape.yaml", "illegal path in archive"), ("/tmp/absolute.yaml", "absolute path in archive")],
)
async def test_tar_entries_escaping(env: Env, member: str, message: str) -> None:
    files = app("resources: [cm.yaml]\n")
    files[member] = b"pwned"
    err = await attempt(env, targz(files))
    assert isinstance(err, ExtractError) and message in str(err)
    assert err.reason == "ArtifactFailed"


async def test_gzip_bomb(env: Env) -> None:
    # 64 MiB of zeros compress to ~64 KiB: under the 1 MiB download cap, over the 4 MiB extraction cap.
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9) as gz, tarfile.open(fileobj=gz, mode="w|") as tar:
        info = tarfile.TarInfo("app/zeros.yaml")
        info.size = 64 << 20
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    err = await attempt(env, raw.getvalue())
    assert isinstance(err, ExtractError) and "extracted size exceeds the limit" in str(err)


async def test_digest_mismatch(env: Env) -> None:
    blob = targz(app("resources: [cm.yaml]\n"))
    err = await attempt(env, blob, digest="sha256:" + "ab" * 32)
    assert isinstance(err, DigestError)
    # upstream's words name the digest it was given, not the one it computed (the differential run)
    assert "ab" * 32 in str(err) and hashlib.sha256(blob).hexdigest() not in str(err)


async def test_oversized_artifact(env: Env) -> None:
    err = await attempt(env, os.urandom(2 << 20))
    assert isinstance(err, ArtifactTooLargeError)


async def test_a_legitimate_artifact_builds(env: Env) -> None:
    blob = targz(app("resources: [cm.yaml]\nconfigMapGenerator:\n- name: g\n  files: [data.txt]\n",
                     **{"data.txt": b"hello"}))
    env.blobs["/ok.tgz"] = blob
    result = await env.pipeline.run(
        url=f"{env.url}/ok.tgz", digest="sha256:" + hashlib.sha256(blob).hexdigest(),
        options=BuildOptions(path="app", allow_remote_bases=False),
    )
    by_name = {o["metadata"]["name"]: o for o in result.objects}
    assert set(by_name) == {"ok", "g-62d9dc7k4m"}
    assert by_name["g-62d9dc7k4m"]["data"] == {"data.txt": "hello"}
