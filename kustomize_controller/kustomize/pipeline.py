"""From a source artifact to the objects to apply: the build pipeline.

Order (reference §5 steps 10.3–10.10, §5.1–§5.5):

    checkout:  temp dir → download + digest → safe extraction → secure join of spec.path → stat
    build:     generate kustomization.yaml + spec overlays → confinement walk
               → decrypt sources (Decryptor) → kustomize build → parse
               → per object, in output order: decrypt (Decryptor) → post-build substitution
               → SOPS guard → digest → commonMetadata

:meth:`BuildPipeline.checkout` is an async context manager so the reconciler can record
``lastAttemptedRevision`` and patch status between the download and the build; the temp dir is
removed when it exits, whatever happened. Errors are the tree of :mod:`.errors`, whose ``reason``
is the Ready reason to write.

The digest (``sha256:<hex>``, for ``status.history``) covers the rendered objects after
decryption and substitution and before commonMetadata, as upstream. A v1 Secret still carrying
a top-level ``sops`` key (and no ``kustomize.toolkit.fluxcd.io/decrypt: disabled`` annotation)
raises :class:`EncryptedSecretError` (ReconciliationFailed) after the digest is known; the error
carries the :class:`BuildResult` so history can still be written.

Blocking work (generation, confinement, extraction, parsing, decryption) runs in threads; the
pipeline keeps no state between calls and is shared by all reconciles.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kustomize_controller.kustomize.confine import check_confinement
from kustomize_controller.kustomize.errors import (
    DecryptionError,
    EncryptedSecretError,
    KustomizeError,
    PathNotFoundError,
)
from kustomize_controller.kustomize.extract import (
    DEFAULT_MAX_ENTRIES,
    DEFAULT_MAX_EXTRACT_BYTES,
    Workspace,
    extract_tarball,
)
from kustomize_controller.kustomize.fetch import ArtifactFetcher
from kustomize_controller.kustomize.generate import Overlay, generate
from kustomize_controller.kustomize.parse import Document, digest, dump_object, parse_documents, render
from kustomize_controller.kustomize.paths import relative_to_root, secure_join
from kustomize_controller.kustomize.substitute import PostBuild, Substituter, VarSource, object_label

if TYPE_CHECKING:
    from kustomize_controller.api.kustomization import Kustomization

DECRYPT_KEY = "kustomize.toolkit.fluxcd.io/decrypt"


class Decryptor(Protocol):
    """SOPS (or other) decryption hooks; both raise :class:`DecryptionError` on failure.

    Messages should not repeat the context: the pipeline prefixes "error decrypting sources: "
    and "decryption failed for '<Kind.version.group>/<name>': ".
    """

    def decrypt_sources(self, root: Path, kustomization_dir: Path) -> None:
        """Decrypt, in place and before the build, the files kustomize will read."""

    def decrypt_object(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Return the object decrypted (or unchanged); called once per built object."""


class Builder(Protocol):
    """Runs kustomize on a directory (see :class:`~.build.KustomizeBuilder`)."""

    async def build(self, directory: Path, *, root: Path, workdir: Path, allow_remote: bool) -> bytes: ...


@dataclass(frozen=True, slots=True)
class CommonMetadata:
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BuildOptions:
    """Everything of a Kustomization spec the pipeline needs, plus controller flags."""

    path: str = ""
    overlay: Overlay = field(default_factory=Overlay)
    post_build: PostBuild | None = None
    common_metadata: CommonMetadata | None = None
    allow_remote_bases: bool = True
    strict_substitution: bool = True

    @classmethod
    def from_spec(
        cls, spec: Mapping[str, Any], *, no_remote_bases: bool = False, strict_substitution: bool = True
    ) -> BuildOptions:
        """From a spec in JSON form (``model_dump(by_alias=True, exclude_none=True)["spec"]``)."""
        cm = spec.get("commonMetadata")
        return cls(
            path=str(spec.get("path") or ""),
            overlay=Overlay.from_spec(spec),
            post_build=PostBuild.from_spec(spec.get("postBuild")),
            common_metadata=None
            if cm is None
            else CommonMetadata(labels=dict(cm.get("labels") or {}), annotations=dict(cm.get("annotations") or {})),
            allow_remote_bases=not no_remote_bases,
            strict_substitution=strict_substitution,
        )

    @classmethod
    def from_kustomization(
        cls, kustomization: Kustomization, *, no_remote_bases: bool = False, strict_substitution: bool = True
    ) -> BuildOptions:
        """From the API model (its JSON form, so fields keep upstream's names)."""
        spec = kustomization.model_dump(by_alias=True, mode="json")["spec"]
        return cls.from_spec(spec, no_remote_bases=no_remote_bases, strict_substitution=strict_substitution)


@dataclass(slots=True)
class Checkout:
    """An extracted artifact: ``root`` (confinement root) and ``directory`` (spec.path inside it)."""

    root: Path
    directory: Path
    workdir: Path


@dataclass(slots=True)
class BuildResult:
    objects: list[dict[str, Any]]
    digest: str
    documents: list[Document]
    metadata_applied: bool = False

    def render(self) -> str:
        """Multi-document YAML of the final objects (commonMetadata included)."""
        if not self.metadata_applied:
            return render(self.documents)
        return "---\n".join(dump_object(o) for o in self.objects)


def format_object(obj: Mapping[str, Any]) -> str:
    """``Kind/namespace/name`` (``Kind/name`` when cluster-scoped), as upstream's FmtUnstructured."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    kind = obj.get("kind", "")
    return f"{kind}/{ns}/{meta.get('name', '')}" if ns else f"{kind}/{meta.get('name', '')}"


def is_encrypted_secret(obj: Mapping[str, Any]) -> bool:
    return obj.get("apiVersion") == "v1" and obj.get("kind") == "Secret" and "sops" in obj


def is_decryption_disabled(obj: Mapping[str, Any]) -> bool:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(DECRYPT_KEY, "")).lower() == "disabled"


def apply_common_metadata(objects: list[dict[str, Any]], cm: CommonMetadata) -> None:
    for obj in objects:
        meta = obj.setdefault("metadata", {})
        if cm.labels:
            meta["labels"] = {**(meta.get("labels") or {}), **cm.labels}
        if cm.annotations:
            meta["annotations"] = {**(meta.get("annotations") or {}), **cm.annotations}


def _realpaths(*paths: Path) -> list[str]:
    return [os.path.realpath(p) for p in paths]


class BuildPipeline:
    """Composes fetch → extract → generate → confine → build → parse → decrypt → substitute."""

    def __init__(
        self,
        *,
        builder: Builder,
        workspace: Workspace,
        fetcher: ArtifactFetcher | None = None,
        max_extract_bytes: int = DEFAULT_MAX_EXTRACT_BYTES,
        max_extract_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> None:
        self._builder = builder
        self._workspace = workspace
        self._fetcher = fetcher
        self._max_extract_bytes = max_extract_bytes
        self._max_extract_entries = max_extract_entries

    @staticmethod
    def _layout(tmp: Path) -> tuple[Path, Path]:
        root = tmp / "artifact"
        workdir = tmp / "work"
        root.mkdir()
        workdir.mkdir()
        return root, workdir

    @staticmethod
    def _select(root: Path, workdir: Path, path: str) -> Checkout:
        directory = secure_join(root, path)
        if not directory.exists():
            raise PathNotFoundError(
                f"kustomization path not found: stat {relative_to_root(root, directory)}: no such file or directory"
            )
        if not directory.is_dir():
            raise PathNotFoundError(
                f"kustomization path not found: {relative_to_root(root, directory)}: not a directory"
            )
        return Checkout(root=root, directory=directory, workdir=workdir)

    @contextlib.asynccontextmanager
    async def checkout(self, *, url: str, digest: str, path: str) -> AsyncIterator[Checkout]:
        """Download, verify and extract an artifact; select ``path``; clean up on exit."""
        if self._fetcher is None:
            raise RuntimeError("BuildPipeline.checkout needs a fetcher")
        async with self._workspace.tempdir() as tmp:
            root, workdir = self._layout(tmp)
            archive = tmp / "artifact.tar.gz"
            await self._fetcher.fetch(url, digest, archive)
            await asyncio.to_thread(
                extract_tarball,
                archive,
                root,
                max_bytes=self._max_extract_bytes,
                max_entries=self._max_extract_entries,
            )
            archive.unlink(missing_ok=True)
            yield self._select(root, workdir, path)

    @contextlib.asynccontextmanager
    async def local_checkout(self, source: Path, *, path: str) -> AsyncIterator[Checkout]:
        """A working copy of a local directory (the CLI's artifact root); symlinks stay links."""
        async with self._workspace.tempdir() as tmp:
            root = tmp / "artifact"
            workdir = tmp / "work"
            workdir.mkdir()
            await asyncio.to_thread(shutil.copytree, source, root, symlinks=True)
            yield self._select(root, workdir, path)

    async def build(
        self,
        checkout: Checkout,
        options: BuildOptions,
        *,
        decryptor: Decryptor | None = None,
        var_source: VarSource | None = None,
    ) -> BuildResult:
        root, directory = (Path(p) for p in await asyncio.to_thread(_realpaths, checkout.root, checkout.directory))
        await asyncio.to_thread(generate, root, directory, options.overlay)
        await asyncio.to_thread(check_confinement, root, directory, allow_remote=options.allow_remote_bases)
        if decryptor is not None:
            try:
                await asyncio.to_thread(decryptor.decrypt_sources, root, directory)
            except DecryptionError as err:
                raise DecryptionError(f"error decrypting sources: {err}") from err
        output = await self._builder.build(
            directory, root=root, workdir=checkout.workdir, allow_remote=options.allow_remote_bases
        )
        documents = await asyncio.to_thread(parse_documents, output)

        substituter = (
            Substituter(options.post_build, var_source, strict=options.strict_substitution)
            if options.post_build is not None
            else None
        )
        for doc in documents:
            if decryptor is not None:
                try:
                    decrypted = await asyncio.to_thread(decryptor.decrypt_object, doc.obj)
                except DecryptionError as err:
                    raise DecryptionError(f"decryption failed for '{object_label(doc.obj)}': {err}") from err
                if decrypted is not doc.obj or decrypted != doc.obj:
                    doc.obj = decrypted
                    doc.text = dump_object(decrypted)
            if substituter is not None:
                changed = await substituter.apply(doc.text, doc.obj)
                if changed is not None:
                    doc.text, doc.obj = changed

        result = BuildResult(
            objects=[d.obj for d in documents], digest=digest(render(documents)), documents=documents
        )
        for obj in result.objects:
            if is_encrypted_secret(obj) and not is_decryption_disabled(obj):
                guard = EncryptedSecretError(
                    f"{format_object(obj)} is SOPS encrypted, configuring decryption is required for this "
                    "secret to be reconciled"
                )
                guard.result = result
                raise guard
        if options.common_metadata is not None and (
            options.common_metadata.labels or options.common_metadata.annotations
        ):
            apply_common_metadata(result.objects, options.common_metadata)
            result.metadata_applied = True
        return result

    async def run(
        self,
        *,
        url: str,
        digest: str,
        options: BuildOptions,
        decryptor: Decryptor | None = None,
        var_source: VarSource | None = None,
    ) -> BuildResult:
        """Checkout and build in one call (when no status needs patching in between)."""
        async with self.checkout(url=url, digest=digest, path=options.path) as co:
            return await self.build(co, options, decryptor=decryptor, var_source=var_source)


__all__ = [
    "BuildOptions",
    "BuildPipeline",
    "BuildResult",
    "Builder",
    "Checkout",
    "CommonMetadata",
    "Decryptor",
    "KustomizeError",
    "apply_common_metadata",
    "format_object",
]
