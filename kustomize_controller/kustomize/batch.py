"""Several pending builds in one builder process: which roots may share one, the wrapper, the split.

Why: a ``kubectl kustomize`` process spends ~30 ms of CPU initialising before it reads a file, and a
4-object build ~2 ms more; N such roots built by one process cost ~30 + 2N ms instead of ~32N
(bench/analysis.md). :mod:`.batch_queue` groups the builds waiting for a slot; this module says which
roots may be grouped, writes the wrapper and splits its output back, proving each part is what the
root alone would have given.

The wrapper (:func:`write_wrapper`) is a kustomization in its own directory listing the roots as
``resources`` in order, each followed by a sentinel (a ConfigMap named with a random token); with
``sortOptions: {order: fifo}`` kustomize emits objects in accumulation order, so the documents between
two sentinels are one root's, joined as the root's own build joins them (:func:`split_output`).

What kustomize (api v0.21, the pinned v5.8.1) does with a wrapper, read from its source: every root is
accumulated by its own target — its resources, generators, components, patches, name prefixes and
suffixes, labels, images and namespace apply inside it only, as when it is the top. What runs once,
over all roots together: hash suffixes (per object: unchanged), ID collisions (an error), name
back-references (``nameref``), ``vars``, ``IgnoreLocal`` (per object), the sort (fifo: none), and the
top's ``buildMetadata`` (which replaces every sub-kustomization's), ``openapi`` (process-global) and
the merged ``configurations`` and ``crds``. Hence:

- A root may share a process (:func:`batch_hint`, from the confinement walk) only when every
  kustomization it reaches uses only :data:`BATCH_FIELDS`, its ``patches`` are strategic-merge patches
  that cannot change a name or kind, its top is a Kustomization sorted fifo (ours, or its own), and it
  has no remote reference. (The builder adds: a small input, :func:`.build.small_input`.)
- ``nameref`` may rewrite a reference ``v`` in one root to an object of another only when ``v`` is one
  of that object's previous names; with the fields above those are its name with the root's name
  prefixes, suffixes and a hash suffix stripped (:func:`previous_names`, a superset). Every rewrite
  leaves that object's name or ``v`` itself in the referrer, and an ambiguity is an error. So a root
  whose output holds no such name of another root's object as a whole scalar saw exactly the
  candidates of its own build; :func:`crossed` lists the roots that do, which are built again alone.
- Any failure of the batch (a collision, an ambiguous reference, a missing sentinel, a timeout...)
  gives no result: :mod:`.batch_queue` builds the halves again, down to single builds, whose output
  and error messages are those of today.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# Top-level fields of a kustomization that act inside its own target only (see the module docstring).
BATCH_FIELDS = frozenset(
    {
        "apiVersion", "kind", "metadata", "resources", "bases", "components", "namespace", "namePrefix",
        "nameSuffix", "commonLabels", "labels", "commonAnnotations", "images", "replicas",
        "configMapGenerator", "secretGenerator", "generatorOptions", "patches", "patchesStrategicMerge",
        "sortOptions",
    }
)
_SENTINEL = "kustomize-controller-batch-{token}-{index}"
_SEPARATOR = re.compile(rb"(?m)^---\n")
_HASH_SUFFIX = re.compile(r"-[a-z0-9]{10}$")
_NAME_RUN = re.compile(rb"[A-Za-z0-9_.-]+")


class BatchSplitError(Exception):
    """The batch output does not have the shape the wrapper asked for."""


@dataclass(frozen=True, slots=True)
class BatchHint:
    """A root that may share a builder process, and the name affixes its kustomizations add."""

    prefixes: frozenset[str] = frozenset()
    suffixes: frozenset[str] = frozenset()


@dataclass(slots=True)
class WalkFacts:
    """What the confinement walk saw that decides :func:`batch_hint` (filled by :mod:`.confine`)."""

    fields: set[str]
    prefixes: set[str]
    suffixes: set[str]
    renaming_patches: bool = False
    top_revisited: bool = False  # a kustomization reached from the root lists the root's directory again

    @classmethod
    def empty(cls) -> WalkFacts:
        return cls(fields=set(), prefixes=set(), suffixes=set())

    def record(self, kus: Mapping[str, Any]) -> None:
        """Note one kustomization's top-level fields and name affixes."""
        self.fields.update(str(k) for k in kus)
        for key, into in (("namePrefix", self.prefixes), ("nameSuffix", self.suffixes)):
            value = kus.get(key)
            if isinstance(value, str) and value:
                into.add(value)

    def record_patch(self, item: Mapping[str, Any], text: str | bytes | None) -> None:
        """Note a ``patches`` entry (``text``: its inline patch or file content, None when unreadable)."""
        options = item.get("options")
        if isinstance(options, dict) and (options.get("allowNameChange") or options.get("allowKindChange")):
            self.renaming_patches = True
            return
        if text is None or not _strategic_merge(text):
            self.renaming_patches = True


def _strategic_merge(text: str | bytes) -> bool:
    """True when ``text`` reads as strategic-merge patches only (mappings); a JSON 6902 patch is a list."""
    try:
        docs = [d for d in yaml.load_all(text, Loader=yaml.CSafeLoader) if d is not None]
    except yaml.YAMLError:
        return False
    return bool(docs) and all(isinstance(d, dict) for d in docs)


def batch_hint(facts: WalkFacts, top: Mapping[str, Any], *, remote: bool) -> BatchHint | None:
    """The hint when the root whose walk gave ``facts`` (``top``: its generated kustomization) may share
    a builder process, else None."""
    sort = top.get("sortOptions")
    if (
        remote
        or facts.renaming_patches
        or not facts.fields <= BATCH_FIELDS
        or top.get("kind", "Kustomization") != "Kustomization"
        or not isinstance(sort, dict)
        or sort.get("order") != "fifo"
        or set(sort) != {"order"}
    ):
        return None
    return BatchHint(prefixes=frozenset(facts.prefixes), suffixes=frozenset(facts.suffixes))


def sentinel_name(token: str, index: int) -> str:
    return _SENTINEL.format(token=token, index=index)


def write_wrapper(wrapper: Path, directories: Sequence[Path], token: str) -> Path:
    """Write the wrapper kustomization in the (empty) directory ``wrapper``; return its file."""
    resources: list[str] = []
    for index, directory in enumerate(directories):
        resources.append(os.path.relpath(directory, wrapper))
        sentinel = f"sentinel-{index}.yaml"
        (wrapper / sentinel).write_text(
            f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {sentinel_name(token, index)}\n"
        )
        resources.append(sentinel)
    kfile = wrapper / "kustomization.yaml"
    kfile.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "sortOptions": {"order": "fifo"},
                "resources": resources,
            },
            sort_keys=False,
        )
    )
    return kfile


def split_output(stdout: bytes, token: str, count: int) -> list[bytes]:
    """Each root's part of the wrapper's output, as its own build prints it."""
    marker = f"kustomize-controller-batch-{token}-".encode()
    parts: list[bytes] = []
    current: list[bytes] = []
    for doc in _SEPARATOR.split(stdout) if stdout else []:
        if marker not in doc:
            current.append(doc)
            continue
        if doc != _sentinel_doc(token, len(parts)):
            raise BatchSplitError(f"unexpected sentinel document at root {len(parts)}")
        parts.append(b"---\n".join(current))
        current = []
    if len(parts) != count or current:
        raise BatchSplitError(f"expected {count} roots, found {len(parts)} and {len(current)} trailing documents")
    return parts


def _sentinel_doc(token: str, index: int) -> bytes:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {sentinel_name(token, index)}\n".encode()


def previous_names(name: str, prefixes: Iterable[str], suffixes: Iterable[str]) -> set[str]:
    """Every name an object now called ``name`` may have had: a hash suffix, then any of ``prefixes``
    and ``suffixes`` stripped, in any order and number (a superset of kustomize's previous IDs' names)."""
    prefixes, suffixes = tuple(prefixes), tuple(suffixes)
    seen = {name}
    todo = [name]
    stripped = _HASH_SUFFIX.sub("", name)
    if stripped != name:
        seen.add(stripped)
        todo.append(stripped)
    while todo:
        current = todo.pop()
        for p in prefixes:
            if current.startswith(p) and (shorter := current[len(p) :]) not in seen:
                seen.add(shorter)
                todo.append(shorter)
        for s in suffixes:
            if current.endswith(s) and (shorter := current[: -len(s)]) not in seen:
                seen.add(shorter)
                todo.append(shorter)
    seen.discard("")
    return seen


def _object_names(output: bytes) -> list[str]:
    names: list[str] = []
    for doc in yaml.load_all(output, Loader=yaml.CSafeLoader):
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("name"), str):
            names.append(meta["name"])
    return names


def crossed(outputs: Sequence[bytes], hints: Sequence[BatchHint], *,
            names: Sequence[Sequence[str]] | None = None) -> set[int]:
    """Indexes of the roots whose output holds, as a whole scalar, a possible previous name of another
    root's object (see the module docstring): their part of the batch is not trusted. ``names``: each
    output's object names when the caller decoded them already."""
    owners: dict[str, set[int]] = {}
    for index, (output, hint) in enumerate(zip(outputs, hints, strict=True)):
        for name in (names[index] if names is not None else _object_names(output)):
            for previous in previous_names(name, hint.prefixes, hint.suffixes):
                owners.setdefault(previous, set()).add(index)
    plain = {n: o for n, o in owners.items() if _NAME_RUN.fullmatch(n.encode())}
    other = {n: o for n, o in owners.items() if n not in plain}
    found: set[int] = set()
    for index, output in enumerate(outputs):
        tokens = {t.decode() for t in _NAME_RUN.findall(output)}
        if any(plain[name] - {index} for name in tokens & plain.keys()):
            found.add(index)
            continue
        for name, owners_of in other.items():
            if owners_of - {index} and _bounded(name).search(output.decode(errors="replace")):
                found.add(index)
                break
    return found


def _bounded(name: str) -> re.Pattern[str]:
    return re.compile(r"(?<![A-Za-z0-9_.-])" + re.escape(name) + r"(?![A-Za-z0-9_.-])")


__all__ = [
    "BATCH_FIELDS",
    "BatchHint",
    "BatchSplitError",
    "WalkFacts",
    "batch_hint",
    "crossed",
    "previous_names",
    "sentinel_name",
    "split_output",
    "write_wrapper",
]
