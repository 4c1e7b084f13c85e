"""From a source artifact to the objects to apply: the build pipeline.

Order (reference §5 steps 10.3–10.10, §5.1–§5.5):

    checkout:  temp dir → download + digest → safe extraction → secure join of spec.path → stat
    build:     generate kustomization.yaml + spec overlays → confinement walk
               → decrypt sources (Decryptor) → kustomize build → parse
               → per object, in output order: decrypt (Decryptor) → post-build substitution
               → SOPS guard → digest → commonMetadata

:meth:`BuildPipeline.checkout` is an async context manager so the reconciler can record
``lastAttemptedRevision`` and patch status between the download and the build; the temp dir is
removed when it exits, whatever happened.

Caches (both optional; without them every checkout downloads and every build runs):

- With an :class:`~.artifact_cache.ArtifactCache`, a checkout holds the shared extracted tree of
  its artifact (one download per ``url`` + ``digest``) and an empty private view; :meth:`build`
  places into the view exactly what the build can read (:mod:`.reach`: hard links when nothing will
  decrypt in it, else copies) and works there, so the shared tree is never written. A large root
  built in parts (:mod:`.split`) needs no view without a decryptor: its parts only read the tree.
  (:meth:`local_checkout` always copies: a local directory may hold symlinks, which an extracted
  artifact never does and a view would not keep.)
- With a :class:`~.build_cache.BuildCache`, :meth:`build` first computes the key of its inputs
  (content reachable from the path, options, resolved postBuild variables, decryption key identity,
  builder identity) and returns the stored objects when it is known (``BuildResult.reused``);
  builds that read remote bases, whose variables cannot be read up front, or whose builder or keys
  cannot be identified are never cached. Only successful builds are stored.

Errors are the tree of :mod:`.errors`, whose ``reason`` is the Ready reason to write.

The digest (``sha256:<hex>``, for ``status.history``) covers the rendered objects after
decryption and substitution and before commonMetadata, as upstream. A v1 Secret still carrying
a top-level ``sops`` key (and no ``kustomize.toolkit.fluxcd.io/decrypt: disabled`` annotation)
raises :class:`EncryptedSecretError` (ReconciliationFailed) after the digest is known; the error
carries the :class:`BuildResult` so history can still be written.

Generation and the confinement walk run once per build: a build that computed its reach (shared
tree, or build cache on) did both there and only writes the generated text (:mod:`.reach`).

Blocking work (generation, confinement, extraction, parsing, decryption) runs in threads, grouped
so that one step is one worker-thread hop (a hop costs ~50-200 µs of CPU in wake-ups); the
pipeline keeps no state between calls but its caches, and is shared by all reconciles.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kustomize_controller.kustomize.artifact_cache import ArtifactCache
from kustomize_controller.kustomize.batch import BatchHint
from kustomize_controller.kustomize.build_cache import BuildCache, build_key
from kustomize_controller.kustomize.confine import check_confinement
from kustomize_controller.kustomize.errors import (
    DecryptionError,
    EncryptedSecretError,
    KustomizeError,
    PathNotFoundError,
    SubstitutionError,
)
from kustomize_controller.kustomize.extract import (
    DEFAULT_MAX_ENTRIES,
    DEFAULT_MAX_EXTRACT_BYTES,
    Workspace,
    extract_tarball,
)
from kustomize_controller.kustomize.fetch import ArtifactFetcher
from kustomize_controller.kustomize.generate import Overlay, generate
from kustomize_controller.kustomize.memo import Memo, estimate
from kustomize_controller.kustomize.parse import Document, digest, dump_object, parse_documents, render
from kustomize_controller.kustomize.paths import relative_to_root, secure_join
from kustomize_controller.kustomize.reach import Reach, materialise, reach, write_generated
from kustomize_controller.kustomize.settle import run_to_end
from kustomize_controller.kustomize.split import Joined
from kustomize_controller.kustomize.substitute import (
    PostBuild,
    Substituter,
    VarSource,
    load_variables,
    object_label,
)

if TYPE_CHECKING:
    from kustomize_controller.api.kustomization import Kustomization

DECRYPT_KEY = "kustomize.toolkit.fluxcd.io/decrypt"
# What builds reach, per (artifact, path, overlay), and where spec.path leads in a cached artifact
# (memo.py): estimated at ~1.4 KiB and ~0.6 KiB an entry for a small Kustomization, so each holds ~12,000
# of those; the least recently used go first, which after a new revision are the old revision's.
REACH_MEMO_BYTES = 16 << 20
SELECT_MEMO_BYTES = 8 << 20


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

    async def build(
        self, directory: Path, *, root: Path, workdir: Path, allow_remote: bool, batch: BatchHint | None = None
    ) -> bytes:
        """``batch``: set when the build may share a builder process with others (:mod:`.batch`)."""


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
        # the spec alone: dumping the whole object also serialised the status (inventory, history) on
        # every reconcile, for nothing; each model serialises itself, so the spec's JSON is the same
        spec = kustomization.spec.model_dump(by_alias=True, mode="json")
        return cls.from_spec(spec, no_remote_bases=no_remote_bases, strict_substitution=strict_substitution)


@dataclass(slots=True)
class Checkout:
    """An extracted artifact: ``root`` (confinement root) and ``directory`` (spec.path inside it).

    ``shared``/``shared_directory``: the artifact cache's tree (never written) and ``spec.path`` in
    it, when the checkout came from the cache. The build's private view is then made only when
    kustomize has to run (a reused build needs none): until then ``root``, ``directory`` and
    ``workdir`` name the shared tree and must not be written; :meth:`BuildPipeline.build` points
    them at the view. ``views`` owns the views' temp dirs (closed when the checkout exits).
    """

    root: Path
    directory: Path
    workdir: Path
    shared: Path | None = None
    shared_directory: Path | None = None
    views: contextlib.AsyncExitStack | None = None
    artifact: tuple[str, str] | None = None  # (url, digest) of a cached artifact


@dataclass(slots=True)
class BuildResult:
    objects: list[dict[str, Any]]
    digest: str
    documents: list[Document]
    metadata_applied: bool = False
    reused: bool = False  # served by the build cache: kustomize did not run (documents are empty)

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


def _reach_size(key: tuple[str, str, str, str, bool], found: Reach) -> int:
    """The reach memo's estimate of an entry (:func:`.memo.estimate`); a batch hint's affixes count too."""
    affixes = (*found.batch.prefixes, *found.batch.suffixes) if found.batch is not None else ()
    size = estimate(*key[:4], found.files, found.dirs, found.trees, found.remote, found.content_key,
                    found.kustomization_file, found.generated, affixes)
    if found.split is not None:  # a digest (or None) and a weight (two tuple slots) per entry
        size += estimate([d for d in found.split.owned if d], found.split.shared) + 16 * len(found.split.weights)
    return size


def _reach_real(source: Path, source_dir: Path, options: BuildOptions) -> Reach:
    real_source, real_dir = (Path(p) for p in _realpaths(source, source_dir))
    return reach(real_source, real_dir, options.overlay, allow_remote=options.allow_remote_bases)


def _prepare(root: Path, directory: Path, options: BuildOptions) -> tuple[Path, Path]:
    """A private copy built without a reach: generate the kustomization and walk it."""
    real_root, real_dir = (Path(p) for p in _realpaths(root, directory))
    generate(real_root, real_dir, options.overlay)
    check_confinement(real_root, real_dir, allow_remote=options.allow_remote_bases)
    return real_root, real_dir


def _prepare_reached(root: Path, directory: Path, found: Reach) -> tuple[Path, Path]:
    """A private copy whose reach was computed on it, untouched since: generation and the walk are
    done, only the generated text is written."""
    real_root, real_dir = (Path(p) for p in _realpaths(root, directory))
    write_generated(found, real_root)
    return real_root, real_dir


async def _remove_view(hop: asyncio.Future[tuple[Path, Path, Path]]) -> None:
    """Remove the view once its hop ended — through a second cancellation too (the hop's thread goes on
    regardless and would leave its directory behind), which is re-raised afterwards."""
    await run_to_end(_remove_view_after(hop))


async def _remove_view_after(hop: asyncio.Future[tuple[Path, Path, Path]]) -> None:
    try:
        tmp = (await asyncio.shield(hop))[0]
    except Exception:  # the hop failed (and removed what it made)
        return
    await asyncio.to_thread(shutil.rmtree, tmp, True)


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
        artifacts: ArtifactCache | None = None,
        builds: BuildCache | None = None,
    ) -> None:
        self._builder = builder
        self._workspace = workspace
        self._fetcher = fetcher
        self._artifacts = artifacts
        self._builds = builds
        self._reach_memo: Memo[tuple[str, str, str, str, bool], Reach] = Memo(
            max_bytes=REACH_MEMO_BYTES, size=_reach_size)
        # spec.path resolved in a cached artifact's tree, relative to it: (url, digest, path) → path
        self._select_memo: Memo[tuple[str, str, str], Path] = Memo(
            max_bytes=SELECT_MEMO_BYTES, size=lambda key, path: estimate(*key, str(path)))
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
        if self._artifacts is not None:
            async with (
                self._artifacts.acquire(url=url, digest=digest) as shared,
                self._shared_checkout(shared, path, artifact=(url, digest)) as checkout,
            ):
                yield checkout
            return
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
    async def _shared_checkout(self, shared: Path, path: str, *, artifact: tuple[str, str]) -> AsyncIterator[Checkout]:
        directory = self._select_shared(shared, path, artifact)
        async with contextlib.AsyncExitStack() as views:
            yield Checkout(
                root=shared,
                directory=directory,
                workdir=shared,
                shared=shared,
                shared_directory=directory,
                views=views,
                artifact=artifact,
            )

    def _select_shared(self, shared: Path, path: str, artifact: tuple[str, str]) -> Path:
        """``spec.path`` in a shared tree, remembered per artifact as :meth:`_reach` is (``url`` +
        ``digest`` fix every byte of the tree, which is never written): a reconcile of a known
        artifact then makes no file-system call on the event loop to find its directory. Only a path
        found is remembered (a missing one is looked up, and reported, every time), relative to the
        tree, so a tree extracted again elsewhere is joined afresh."""
        key = (*artifact, path)
        relative = self._select_memo.get(key)
        if relative is not None:
            return shared / relative
        directory = self._select(shared, shared, path).directory
        self._select_memo.put(key, directory.relative_to(shared))
        return directory

    async def _reach(self, checkout: Checkout, source: Path, source_dir: Path, options: BuildOptions) -> Reach:
        """:func:`.reach.reach`, remembered per artifact (``url`` + ``digest`` fix every byte of the
        tree, so the same path and overlay always reach the same files): a periodic reconcile of an
        unchanged artifact then reads nothing from disk. Local directories can change: never kept."""
        memo_key = None
        if checkout.artifact is not None:
            overlay = json.dumps(dataclasses.asdict(options.overlay), sort_keys=True, default=repr)
            memo_key = (*checkout.artifact, str(source_dir.relative_to(source)), overlay, options.allow_remote_bases)
            found = self._reach_memo.get(memo_key)
            if found is not None:
                return found
        found = await asyncio.to_thread(_reach_real, source, source_dir, options)
        if memo_key is not None:
            self._reach_memo.put(memo_key, found)
        return found

    async def _open_view(self, checkout: Checkout, source: Path, found: Reach, *, link: bool) -> tuple[Path, Path]:
        """Give the build its private temp dir holding copies of what it can read (hard links with
        ``link``: nothing will decrypt in it) and its generated kustomization, in one worker-thread hop;
        the dir is removed when the checkout exits (once the hop ended, even when the build was
        cancelled meanwhile). Returns the build's real root and directory."""
        assert checkout.views is not None and checkout.shared_directory is not None and checkout.shared is not None
        relative = checkout.shared_directory.relative_to(checkout.shared)
        hop = asyncio.ensure_future(asyncio.to_thread(self._make_view, found, source, relative, link))
        checkout.views.push_async_callback(_remove_view, hop)
        tmp, root, directory = await asyncio.shield(hop)
        checkout.root, checkout.workdir = tmp / "artifact", tmp / "work"
        checkout.directory = checkout.root / relative
        return root, directory

    def _make_view(self, found: Reach, source: Path, relative: Path, link: bool) -> tuple[Path, Path, Path]:
        tmp = self._workspace.create()
        try:
            root, _ = self._layout(tmp)
            materialise(found, source, root, link=link)
            real_root, real_dir = (Path(p) for p in _realpaths(root, root / relative))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return tmp, real_root, real_dir

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
        source = checkout.shared if checkout.shared is not None else checkout.root
        source_dir = checkout.shared_directory if checkout.shared_directory is not None else checkout.directory
        found: Reach | None = None
        if checkout.shared is not None or (self._builds is not None and self._builds.enabled):
            found = await self._reach(checkout, source, source_dir, options)
        key: str | None = None
        variables: dict[str, str] | None = None
        if found is not None and self._builds is not None and self._builds.enabled:
            key, variables = await self._cache_key(found, options, decryptor, var_source)
            if key is None:
                self._builds.record("bypass")
            else:
                cached = await self._builds.load(key)
                if cached is not None:
                    self._builds.record("hit")
                    objects, rendered_digest = cached
                    return BuildResult(
                        objects=objects, digest=rendered_digest, documents=[], metadata_applied=True, reused=True
                    )
                self._builds.record("miss")
        # A large root whose parts are proven to be its whole build needs no view: its parts read the
        # shared tree, which they never write (with a decryptor, sources are decrypted in a view first).
        joined: Joined | None = None
        if checkout.shared is not None and found is not None and found.split is not None and decryptor is None:
            real_source, real_dir = (Path(p) for p in _realpaths(source, source_dir))
            joined = await self._try_split(real_dir, real_source, found)
        if joined is not None:
            result = await self._finish(joined.documents, options, decryptor=decryptor, var_source=var_source,
                                        variables=variables)
        else:
            # The kustomization is generated and the confinement walk runs once: a build that computed its
            # reach (shared tree, or build cache on) did both there, on the very bytes it builds.
            if checkout.shared is not None:
                assert found is not None
                root, directory = await self._open_view(checkout, source, found, link=decryptor is None)
            elif found is not None:
                root, directory = await asyncio.to_thread(_prepare_reached, checkout.root, checkout.directory, found)
            else:
                root, directory = await asyncio.to_thread(_prepare, checkout.root, checkout.directory, options)
            result = await self._run_build(
                checkout, root, directory, options, decryptor=decryptor, var_source=var_source, variables=variables,
                found=found, split=checkout.shared is None or decryptor is not None,  # else tried above
            )
        if key is not None and self._builds is not None:
            await self._builds.store(key, result.objects, result.digest)
        return result

    async def _try_split(self, directory: Path, root: Path, found: Reach) -> Joined | None:
        """The builder's parts of a large root, when it splits builds and proves them (:mod:`.split`)."""
        build_split = getattr(self._builder, "build_split", None)
        if found.split is None or not callable(build_split):
            return None
        joined: Joined | None = await build_split(directory, root=root, plan=found.split, generated=found.generated)
        return joined

    async def _cache_key(
        self, found: Reach, options: BuildOptions, decryptor: Decryptor | None, var_source: VarSource | None
    ) -> tuple[str | None, dict[str, str] | None]:
        """The build cache key (None: not cacheable) and the postBuild variables read for it."""
        identity = getattr(self._builder, "cache_identity", None)
        decryption = "none" if decryptor is None else getattr(decryptor, "cache_identity", None)
        if found.remote or not callable(identity) or decryption is None:
            return None, None
        variables: dict[str, str] | None = None
        if options.post_build is not None:
            try:
                variables = await load_variables(options.post_build, var_source)
            except SubstitutionError:
                # Reported by the build itself, worded and attributed as upstream does.
                return None, None
        key = build_key(
            content=found.content_key,
            options=options,
            builder=str(identity()),
            variables=variables,
            decryption=str(decryption),
        )
        return key, variables

    async def _run_build(
        self,
        checkout: Checkout,
        root: Path,
        directory: Path,
        options: BuildOptions,
        *,
        decryptor: Decryptor | None,
        var_source: VarSource | None,
        variables: dict[str, str] | None,
        found: Reach | None = None,
        split: bool = True,
    ) -> BuildResult:
        """Build ``directory`` in ``root`` (real paths; kustomization generated, confinement checked);
        ``found``: its reach, whose hints let the build share a process or (``split``) run in parts."""
        if decryptor is not None:
            try:
                await asyncio.to_thread(decryptor.decrypt_sources, root, directory)
            except DecryptionError as err:
                raise DecryptionError(f"error decrypting sources: {err}") from err
        joined = None if found is None or not split else await self._try_split(directory, root, found)
        if joined is not None:
            documents = joined.documents
        else:
            output = await self._builder.build(
                directory, root=root, workdir=checkout.workdir, allow_remote=options.allow_remote_bases,
                batch=None if found is None else found.batch,
            )
            documents = await asyncio.to_thread(parse_documents, output)
        return await self._finish(documents, options, decryptor=decryptor, var_source=var_source,
                                  variables=variables)

    async def _finish(
        self,
        documents: list[Document],
        options: BuildOptions,
        *,
        decryptor: Decryptor | None,
        var_source: VarSource | None,
        variables: dict[str, str] | None,
    ) -> BuildResult:
        """From the builder's decoded ``documents``: decryption, substitution, digest, guard, commonMetadata."""
        substituter = (
            Substituter(options.post_build, var_source, strict=options.strict_substitution)
            if options.post_build is not None
            else None
        )
        if substituter is not None and variables is not None:
            substituter.preload(variables)  # already read for the cache key: the same values
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
