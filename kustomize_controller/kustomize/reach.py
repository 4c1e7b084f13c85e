"""What one build can read, found on a shared artifact tree without writing to it.

Contract (:func:`reach`, synchronous — run it in a thread):

- Generation runs in memory (:func:`.generate.render_kustomization`) and the confinement walk
  starts from that generated kustomization, so the result covers everything kustomize, generation
  and SOPS source decryption can read for this build: every directory the walk visits (with every
  kustomization file name present in it — two of them are an error kustomize must still see), every
  local path an entry resolves to (files; directories that are not kustomizations are taken whole;
  missing paths are recorded as missing), and, for a generated kustomization, the manifests it
  lists. Escapes raise the same :class:`ConfinementError`/:class:`GenerateError` as a build would.
- :attr:`Reach.content_key` is a sha256 over all of it: relative paths, file contents, directory
  markers, missing markers and the generated kustomization text. Same key ⇒ kustomize reads the
  same bytes. Remote references are listed in :attr:`Reach.remote` (their content is not ours to
  key: such builds are never cached).
- :func:`materialise` copies exactly that set into a build's empty view, under the same relative
  paths, the kustomization file written as generated (below), so the build behaves as it would on a
  full private extraction; it hard-links the files instead when asked, for a build nothing decrypts
  (SOPS decrypts files in place, and the shared tree must never be written).
- The generated kustomization (:attr:`Reach.generated`, for :attr:`Reach.kustomization_file`) is
  what :func:`.generate.generate` would write in the build directory, and the confinement walk above
  is the one a build runs: a build of exactly the tree that was reached (same bytes, same overlay)
  writes that text with :func:`write_generated` instead of generating and walking again.
- :attr:`Reach.batch` says whether the build may share a builder process with others (:mod:`.batch`),
  :attr:`Reach.split` whether it may be built in parts (:mod:`.split`; each ``resources`` entry of the
  root weighed by the objects of the files it reaches, counted while they are hashed).
"""

from __future__ import annotations

import bisect
import hashlib
import os
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kustomize_controller.kustomize.batch import BatchHint, batch_hint
from kustomize_controller.kustomize.confine import check_confinement
from kustomize_controller.kustomize.generate import Overlay, render_kustomization
from kustomize_controller.kustomize.paths import KUSTOMIZATION_FILE_NAMES
from kustomize_controller.kustomize.split import SplitPlan, split_plan

_CHUNK = 1 << 16
_KIND_LINE = b"\nkind:"  # a line starting an object's kind: one object (a List's items are indented)


@dataclass(slots=True)
class Reach:
    files: list[str] = field(default_factory=list)  # relative paths of regular files to copy
    dirs: list[str] = field(default_factory=list)  # relative directories to create
    trees: list[str] = field(default_factory=list)  # referenced non-kustomization dirs, copied whole
    remote: list[str] = field(default_factory=list)
    content_key: str = ""
    kustomization_file: str = ""  # relative path of the build's kustomization file (maybe not there yet)
    generated: str = ""  # the text generation writes to it (spec overlays applied)
    batch: BatchHint | None = None  # set when the build may share a builder process (:mod:`.batch`)
    split: SplitPlan | None = None  # set when the build may run in parts (:mod:`.split`)


def _file_digest(path: str, counts: dict[str, int] | None = None) -> str:
    """The file's sha256; with ``counts``, also its objects (lines starting ``kind:``, at least one) under
    ``path``."""
    h = hashlib.sha256()
    objects = 0
    tail = b"\n"  # the file starts a line; then the last bytes of the chunk before (a line across chunks)
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            if counts is not None:
                objects += (tail + chunk).count(_KIND_LINE)
                tail = chunk[-(len(_KIND_LINE) - 1):]
    if counts is not None:
        counts[path] = max(1, objects)
    return h.hexdigest()


def _weights(directory: str, entries: list[str], counts: dict[str, int]) -> list[int]:
    """The objects each ``resources`` entry of the root in ``directory`` reaches: a file's own, a
    directory's files' together (an estimate: it balances the parts, it decides nothing else)."""
    weights = []
    paths: list[str] | None = None  # sorted, for directories
    for entry in entries:
        path = os.path.normpath(os.path.join(directory, entry))
        if path not in counts:  # an extracted tree has no links: only a local copy's may need resolving
            path = os.path.realpath(path)
        if path in counts:
            weights.append(counts[path])
            continue
        if paths is None:
            paths = sorted(counts)
        prefix = path + os.sep
        total = 0
        for index in range(bisect.bisect_left(paths, prefix), len(paths)):
            if not paths[index].startswith(prefix):
                break
            total += counts[paths[index]]
        weights.append(max(1, total))
    return weights


def _tree_entries(root: str, top: str) -> list[tuple[str, str]]:
    """``(relative path, 'd' | file digest)`` for everything below ``top``, sorted."""
    out: list[tuple[str, str]] = []
    for dirpath, dirs, files in os.walk(top):
        dirs.sort()
        for d in dirs:
            out.append((os.path.relpath(os.path.join(dirpath, d), root), "d"))
        for name in sorted(files):
            full = os.path.join(dirpath, name)
            if os.path.isfile(full):
                out.append((os.path.relpath(full, root), _file_digest(full)))
    return out


def reach(root: Path, directory: Path, overlay: Overlay, *, allow_remote: bool) -> Reach:
    """Everything a build of ``directory`` with ``overlay`` can read below ``root`` (read-only)."""
    real_root = os.path.realpath(root)
    kfile, kus, generated = render_kustomization(root, directory, overlay)
    report = check_confinement(root, directory, allow_remote=allow_remote, top=(kfile, kus))
    h = hashlib.sha256()
    h.update(b"generated\0" + generated.encode() + b"\0")
    out = Reach(
        remote=list(report.remote_references),
        kustomization_file=os.path.relpath(os.path.join(os.path.realpath(kfile.parent), kfile.name), real_root),
        generated=generated,
        batch=batch_hint(report.facts, kus, remote=bool(report.remote_references)),
    )
    listed = kus.get("resources")
    splittable = isinstance(listed, list) and split_plan(
        kus, out.batch, [1] * len(listed), top_revisited=report.facts.top_revisited) is not None
    counts: dict[str, int] | None = {} if splittable else None
    files: set[str] = set()
    visited = {str(d) for d in report.directories}

    for d in sorted(visited):
        rel = os.path.relpath(d, real_root)
        out.dirs.append(rel)
        for name in KUSTOMIZATION_FILE_NAMES:
            candidate = os.path.join(d, name)
            if os.path.isfile(candidate):
                files.add(os.path.relpath(candidate, real_root))
            elif os.path.isdir(candidate):
                out.dirs.append(os.path.relpath(candidate, real_root))

    entries: list[tuple[str, str]] = []
    for path in sorted(str(p) for p in report.paths):
        rel = os.path.relpath(path, real_root)
        if os.path.isfile(path):
            files.add(rel)
        elif os.path.isdir(path):
            if path not in visited:
                out.trees.append(rel)
                entries.extend(_tree_entries(real_root, path))
            entries.append((rel, "d"))
        else:
            entries.append((rel, "missing"))

    out.files = sorted(files)
    digests: dict[str, str] = {}
    for rel in out.files:
        digests[rel] = _file_digest(os.path.join(real_root, rel), counts)
        entries.append((rel, digests[rel]))
    for rel in out.dirs:
        entries.append((rel, "d"))
    for ref in sorted(out.remote):
        entries.append((ref, "remote"))
    ordered = sorted(set(entries))
    for rel, marker in ordered:
        h.update(rel.encode() + b"\0" + marker.encode() + b"\n")
    out.content_key = h.hexdigest()
    if counts is not None:
        assert isinstance(kus["resources"], list)
        real_dir = os.path.realpath(directory)
        weights = _weights(real_dir, kus["resources"], counts)
        owned = _owned(real_dir, real_root, kus["resources"], digests, report.references, out.trees)
        mine = {rel for rel in owned if rel is not None}
        shared = hashlib.sha256()
        for rel, marker in ordered:
            if rel not in mine:
                shared.update(rel.encode() + b"\0" + marker.encode() + b"\n")
        out.split = split_plan(kus, out.batch, weights, top_revisited=report.facts.top_revisited,
                               owned=[None if rel is None else digests[rel] for rel in owned],
                               shared=shared.hexdigest())
    return out


def _owned(directory: str, root: str, entries: list[str], digests: dict[str, str], references: Counter[Path],
           trees: list[str]) -> list[str | None]:
    """Per ``resources`` entry of the root, the relative path of the file it names when nothing else the
    build reads is that file — no other entry of any kustomization resolves to it, it is no directory's
    kustomization file and lies in no directory read whole — so only that entry's part reads it; else
    None (a link, a directory, a missing file: None)."""
    owned: list[str | None] = []
    for entry in entries:
        path = os.path.normpath(os.path.join(directory, entry))
        rel = os.path.relpath(path, root)
        alone = (
            rel in digests
            and references.get(Path(path)) == 1
            and os.path.basename(rel) not in KUSTOMIZATION_FILE_NAMES
            and not any(rel.startswith(tree + os.sep) for tree in trees)
        )
        owned.append(rel if alone else None)
    return owned


def materialise(found: Reach, source: Path, view: Path, *, link: bool = False) -> None:
    """Copy what ``found`` lists from ``source`` into the (new or empty) directory ``view``, and write
    the generated kustomization (:func:`write_generated`) instead of copying the file it replaces.

    Contents only (file modes are not kept: kustomize only reads, and runs no plugins); each
    directory is made once (creating a file or directory costs ~0.2 ms of CPU on a VM's disk).
    ``link``: hard-link the files instead (one ``link`` call instead of creating and writing a file:
    ~30 µs against 0.1-0.5 ms on a VM's disk) — only for a view nothing writes into but its generated
    kustomization, which is written as a new file (no decryption: SOPS decrypts in place); a file that
    cannot be linked (another file system) is copied."""
    view.mkdir(parents=True, exist_ok=True)
    made = {os.path.normpath(view)}
    place = _link_or_copy if link else shutil.copyfile

    def ensure(directory: str) -> None:
        if directory not in made:
            os.makedirs(directory, exist_ok=True)
            made.add(directory)

    for rel in found.dirs:
        ensure(os.path.normpath(view / rel))
    for rel in found.trees:
        shutil.copytree(source / rel, view / rel, dirs_exist_ok=True, copy_function=place)
    for rel in found.files:
        if rel == found.kustomization_file:
            continue
        target = os.path.normpath(view / rel)
        ensure(os.path.dirname(target))
        place(source / rel, target)
    ensure(os.path.dirname(os.path.normpath(view / found.kustomization_file)))
    write_generated(found, view)


def _link_or_copy(src: str | Path, dst: str | Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def write_generated(found: Reach, root: Path) -> Path:
    """Write the generated kustomization into the tree ``found`` was computed on (or a materialised
    view of it), as :func:`.generate.generate` does: a symlink in its place is replaced, not followed."""
    kfile = root / found.kustomization_file
    if kfile.is_symlink():
        kfile.unlink()
    kfile.write_text(found.generated, encoding="utf-8")
    return kfile
