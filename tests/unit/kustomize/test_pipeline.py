"""The pipeline's composition with a scripted builder: hooks, guard, digest, commonMetadata, checkout."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kustomize_controller.kustomize.errors import (
    ArtifactNotFoundError,
    DecryptionError,
    EncryptedSecretError,
    ExtractError,
    ManifestParseError,
    PathNotFoundError,
    SubstitutionError,
)
from kustomize_controller.kustomize.extract import Workspace
from kustomize_controller.kustomize.fetch import ArtifactFetcher
from kustomize_controller.kustomize.parse import parse_documents
from kustomize_controller.kustomize.pipeline import (
    BuildOptions,
    BuildPipeline,
    BuildResult,
    Checkout,
    format_object,
)
from kustomize_controller.runtime.clock import FakeClock
from tests.archives import targz
from tests.loopback import serve, serve_blobs

OUTPUT = """apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
  namespace: ns
data:
  port: ${PORT}
---
apiVersion: v1
kind: Secret
metadata:
  name: creds
  namespace: ns
data:
  token: ZW5j
"""


class ScriptedBuilder:
    def __init__(self, output: str = OUTPUT) -> None:
        self.output = output
        self.calls: list[tuple[Path, Path, bool]] = []

    async def build(self, directory: Path, *, root: Path, workdir: Path, allow_remote: bool,
                    batch: object = None) -> bytes:
        assert (directory / "kustomization.yaml").exists()  # generation ran first
        self.calls.append((directory, root, allow_remote))
        return self.output.encode()


class RecordingDecryptor:
    def __init__(self) -> None:
        self.events: list[str] = []

    def decrypt_sources(self, root: Path, kustomization_dir: Path) -> None:
        self.events.append(f"sources:{kustomization_dir.name}")

    def decrypt_object(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.events.append(f"object:{obj['metadata']['name']}")
        if obj["kind"] == "Secret":
            return {**obj, "data": {"token": "ZGVj"}}
        return obj


class FailingDecryptor(RecordingDecryptor):
    def __init__(self, where: str) -> None:
        super().__init__()
        self.where = where

    def decrypt_sources(self, root: Path, kustomization_dir: Path) -> None:
        if self.where == "sources":
            raise DecryptionError("cannot get sops data key")

    def decrypt_object(self, obj: dict[str, Any]) -> dict[str, Any]:
        if self.where == "object":
            raise DecryptionError("cannot get sops data key")
        return obj


@pytest.fixture
def artifact(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "app").mkdir(parents=True)
    (src / "app" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n")
    return src


async def build(artifact: Path, tmp_path: Path, options: BuildOptions, builder: ScriptedBuilder | None = None,
                **kw: Any) -> BuildResult:
    pipeline = BuildPipeline(builder=builder or ScriptedBuilder(), workspace=Workspace(tmp_path / "ws"))
    async with pipeline.local_checkout(artifact, path=options.path) as co:
        return await pipeline.build(co, options, **kw)


async def test_objects_digest_and_order(artifact: Path, tmp_path: Path) -> None:
    result = await build(artifact, tmp_path, BuildOptions(path="app"))
    assert [format_object(o) for o in result.objects] == ["ConfigMap/ns/cm", "Secret/ns/creds"]
    assert result.digest == "sha256:" + hashlib.sha256(OUTPUT.encode()).hexdigest()
    assert result.render() == OUTPUT
    assert list((tmp_path / "ws").iterdir()) == []  # temp dir removed


async def test_decryptor_hooks_run_in_order_and_replace_objects(artifact: Path, tmp_path: Path) -> None:
    dec = RecordingDecryptor()
    result = await build(artifact, tmp_path, BuildOptions(path="app"), decryptor=dec)
    assert dec.events == ["sources:app", "object:cm", "object:creds"]
    assert result.objects[1]["data"] == {"token": "ZGVj"}
    assert "ZGVj" in result.render()


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("sources", "error decrypting sources: cannot get sops data key"),
        ("object", "decryption failed for 'ConfigMap.v1.[noGrp]/cm': cannot get sops data key"),
    ],
)
async def test_decryption_errors_are_build_failures(artifact: Path, tmp_path: Path, where: str,
                                                    message: str) -> None:
    with pytest.raises(DecryptionError) as err:
        await build(artifact, tmp_path, BuildOptions(path="app"), decryptor=FailingDecryptor(where))
    assert str(err.value) == message
    assert err.value.reason == "BuildFailed"


ENCRYPTED = """apiVersion: v1
kind: Secret
metadata:
  name: s
  namespace: ns
  annotations: {annotations}
data:
  a: ENC[AES256_GCM,data:x]
sops:
  version: 3.8.1
"""


async def test_encrypted_secret_without_decryption_is_refused(artifact: Path, tmp_path: Path) -> None:
    builder = ScriptedBuilder(ENCRYPTED.format(annotations="{}"))
    with pytest.raises(EncryptedSecretError) as err:
        await build(artifact, tmp_path, BuildOptions(path="app"), builder)
    assert str(err.value) == (
        "Secret/ns/s is SOPS encrypted, configuring decryption is required for this secret to be reconciled"
    )
    assert err.value.reason == "ReconciliationFailed"
    assert isinstance(err.value.result, BuildResult) and err.value.result.digest.startswith("sha256:")


async def test_encrypted_secret_with_decrypt_disabled_passes(artifact: Path, tmp_path: Path) -> None:
    builder = ScriptedBuilder(ENCRYPTED.format(annotations="{kustomize.toolkit.fluxcd.io/decrypt: Disabled}"))
    result = await build(artifact, tmp_path, BuildOptions(path="app"), builder)
    assert result.objects[0]["sops"] == {"version": "3.8.1"}


async def test_substitution_and_common_metadata(artifact: Path, tmp_path: Path) -> None:
    options = BuildOptions.from_spec(
        {
            "path": "./app",
            "postBuild": {"substitute": {"PORT": "80"}},
            "commonMetadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
        }
    )
    result = await build(artifact, tmp_path, options)
    assert result.objects[0]["data"] == {"port": 80}
    for obj in result.objects:
        assert obj["metadata"]["labels"] == {"team": "a"}
        assert obj["metadata"]["annotations"] == {"note": "x"}
    # The digest covers the substituted output before commonMetadata.
    assert result.digest == "sha256:" + hashlib.sha256(OUTPUT.replace("${PORT}", "80").encode()).hexdigest()
    rendered = parse_documents(result.render())
    assert [d.obj for d in rendered] == result.objects


async def test_strict_substitution_follows_the_option(artifact: Path, tmp_path: Path) -> None:
    options = BuildOptions.from_spec({"path": "app", "postBuild": {"substitute": {"OTHER": "1"}}})
    with pytest.raises(SubstitutionError, match='variable not set \\(strict mode\\): "PORT"'):
        await build(artifact, tmp_path, options)
    lenient = BuildOptions.from_spec(
        {"path": "app", "postBuild": {"substitute": {"OTHER": "1"}}}, strict_substitution=False
    )
    assert (await build(artifact, tmp_path, lenient)).objects[0]["data"] == {"port": None}


async def test_invalid_objects_are_parse_errors(artifact: Path, tmp_path: Path) -> None:
    builder = ScriptedBuilder("apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n")
    with pytest.raises(ManifestParseError, match=r"^failed to decode Kubernetes apiVersion, kind and name from: "):
        await build(artifact, tmp_path, BuildOptions(path="app"), builder)


@pytest.mark.parametrize("path", ["missing", "app/cm.yaml"])
async def test_missing_path(artifact: Path, tmp_path: Path, path: str) -> None:
    with pytest.raises(PathNotFoundError, match=r"^kustomization path not found: "):
        await build(artifact, tmp_path, BuildOptions(path=path))


async def test_path_cannot_escape_the_root(artifact: Path, tmp_path: Path) -> None:
    # securejoin semantics: ".." is clamped at the root, so this selects <root>/app.
    builder = ScriptedBuilder()
    await build(artifact, tmp_path, BuildOptions(path="../../../app"), builder)
    directory, root, _ = builder.calls[0]
    assert directory == root / "app"


async def test_remote_flag_is_passed_to_builder(artifact: Path, tmp_path: Path) -> None:
    builder = ScriptedBuilder()
    await build(artifact, tmp_path, BuildOptions.from_spec({"path": "app"}, no_remote_bases=True), builder)
    assert builder.calls[0][2] is False


@pytest.fixture
async def artifact_server() -> AsyncIterator[tuple[str, dict[str, bytes]]]:
    blobs: dict[str, bytes] = {}
    runner, url = await serve(serve_blobs(blobs))
    try:
        yield url, blobs
    finally:
        await runner.cleanup()


async def test_checkout_downloads_extracts_and_cleans_up(artifact_server: tuple[str, dict[str, bytes]],
                                                        tmp_path: Path) -> None:
    url, blobs = artifact_server
    blob = targz({"app/cm.yaml": b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n"})
    blobs["/a.tgz"] = blob
    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
    async with aiohttp.ClientSession() as session:
        fetcher = ArtifactFetcher(session=session, clock=FakeClock(), env={})
        builder = ScriptedBuilder()
        pipeline = BuildPipeline(builder=builder, workspace=Workspace(tmp_path / "ws"), fetcher=fetcher)
        seen: list[Checkout] = []
        async with pipeline.checkout(url=f"{url}/a.tgz", digest=digest, path="app") as co:
            seen.append(co)
            assert (co.directory / "cm.yaml").exists()
            assert not (co.root.parent / "artifact.tar.gz").exists()
            result = await pipeline.build(co, BuildOptions(path="app"))
        assert len(result.objects) == 2
        assert not seen[0].root.exists()
        result = await pipeline.run(url=f"{url}/a.tgz", digest=digest, options=BuildOptions(path="app"))
        assert len(result.objects) == 2
        with pytest.raises(ArtifactNotFoundError):
            await pipeline.run(url=f"{url}/missing.tgz", digest=digest, options=BuildOptions())
        blobs["/evil.tgz"] = targz({"../../evil": b"x"})
        evil_digest = "sha256:" + hashlib.sha256(blobs["/evil.tgz"]).hexdigest()
        with pytest.raises(ExtractError):
            await pipeline.run(url=f"{url}/evil.tgz", digest=evil_digest, options=BuildOptions())
    assert list((tmp_path / "ws").iterdir()) == []
    assert not (tmp_path / "evil").exists()


def test_options_from_the_api_model() -> None:
    from kustomize_controller.api.kustomization import parse_kustomization

    ks = parse_kustomization(
        {
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": "a", "namespace": "n"},
            "spec": {
                "interval": "1m", "prune": True, "sourceRef": {"kind": "GitRepository", "name": "r"},
                "path": "./x", "targetNamespace": "t", "namePrefix": "p-",
                "patches": [{"patch": "p", "target": {"kind": "Deployment", "labelSelector": "a=b"}}],
                "images": [{"name": "n", "newTag": "1"}], "components": ["../c"],
                "commonMetadata": {"labels": {"a": "b"}},
                "postBuild": {"substitute": {"A": "1"}, "substituteFrom": [{"kind": "Secret", "name": "s"}]},
            },
        }
    )
    options = BuildOptions.from_kustomization(ks, no_remote_bases=True, strict_substitution=False)
    assert options.path == "./x"
    assert options.overlay.target_namespace == "t" and options.overlay.name_prefix == "p-"
    assert options.overlay.patches == ({"patch": "p", "target": {"kind": "Deployment", "labelSelector": "a=b"}},)
    assert options.overlay.images == ({"name": "n", "newTag": "1"},)
    assert options.post_build is not None and options.post_build.substitute == {"A": "1"}
    assert options.post_build.substitute_from[0].kind == "Secret"
    assert options.common_metadata is not None and options.common_metadata.labels == {"a": "b"}
    assert not options.allow_remote_bases and not options.strict_substitution
