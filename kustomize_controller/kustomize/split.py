"""One large root built as several parts in parallel builder processes, when — and only when — the
joined parts are provably byte for byte the whole build's output (the batched builds of :mod:`.batch`
turned around).

Why: kustomize (api v0.21, the pinned v5.8.1) is quadratic in the objects of one root. Every object
appended to a resource map is checked against every object already there for an ID collision
(``resWrangler.Append``), each check re-deriving both IDs from the YAML nodes; the ``namespace:``
transformer checks every object it moves against all the others (``GetMatchingResourcesByCurrentId``);
dropping local-config objects at the top rebuilds the map with the same checks (``IgnoreLocal``), and
every targeted patch re-appends the whole map. Profiled on a root of 2,000 ConfigMaps with
``namespace:``: 87 % of the CPU is ``Resource.CurId`` called from those loops. A root of 5,000 objects
takes 68 s of CPU where 20 parts of 250 take about 2 s in all.

Which roots (:func:`split_plan`, decided once per reach): everything a build reaches may share a
builder process (a :class:`~.batch.BatchHint`: only per-object transformations in every kustomization,
no vars, replacements, configurations, CRDs, openapi or renaming patches, sorted fifo, no remote
reference), the walk never comes back to the root's own directory, and the root itself (its generated
kustomization) uses only :data:`SPLIT_FIELDS`: ``patches`` only with a ``target`` (a patch without one
must match exactly one object of the whole root), no ``components``, ``replicas`` (an error when
nothing matches), ``bases`` or ``patchesStrategicMerge``, and generators only with the default
``behavior`` (``merge``/``replace`` act on another object). What kustomize does with such a root, read
from its source: each entry of ``resources`` is accumulated on its own (a file's objects, or a
directory's whole build) and appended in order, then the root's generators add their objects, then
each of the root's transformers acts on every object alone; at the top, hash suffixes (per object),
name back-references (``nameref``), the local-config drop (per object) and the sort (fifo: none).

How (:func:`write_parts`): the root's ``resources`` are cut into contiguous slices of about
``part_objects`` objects (each entry weighed by the objects its files hold: their lines starting ``kind:``, counted by
:mod:`.reach` while it hashes them);
each slice becomes a wrapper kustomization in its own directory — the root's kustomization with
``resources`` replaced by the slice, every path rewritten relative to the wrapper, and the root's
generators in the last part only (they come after all resources). The parts run in parallel builder
processes and their outputs are joined in order (:func:`join_parts`).

Proof (:func:`check_parts`), else the whole build runs as before:

- every part's process succeeded and its output parses (any failure: the whole build, whose error
  and message are then the root's own);
- no two parts hold objects of the same group and kind whose names, a hash suffix and the root's own
  name prefix and suffix stripped (:func:`~.batch.previous_names`), may meet: two objects collide in
  the whole build (an error there) only with the same ID when appended, before the root's transformers
  (which rename every object of a kind alike) and the hash suffixes (added last, per object) — so no
  collision passes unseen;
- no part's output holds, as a whole scalar, a possible previous name of another part's object
  (:func:`~.batch.crossed`): ``nameref`` rewrites a reference only to an object one of whose names it
  holds, so each part saw exactly the candidates of the whole build;
- the joined output is within the builder's output cap.

Then each part is the whole build's output for its slice, and the slices are in the whole build's
order. The split never reads anything the whole build would not: the wrappers list only the root's
own entries (already confined by the walk).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kustomize_controller.kustomize.batch import BatchHint, crossed, previous_names
from kustomize_controller.kustomize.parse import Document, parse_documents

# Top-level fields the split root itself may use (every reached kustomization is held to BATCH_FIELDS).
SPLIT_FIELDS = frozenset(
    {
        "apiVersion", "kind", "metadata", "resources", "namespace", "namePrefix", "nameSuffix", "commonLabels",
        "labels", "commonAnnotations", "images", "configMapGenerator", "secretGenerator", "generatorOptions",
        "patches", "sortOptions",
    }
)
_GENERATORS = ("configMapGenerator", "secretGenerator")
# Defaults measured on 2 cores (docs/benchmarks.md, issue 36): a part of ~250 objects costs the least CPU
# per object (below, the process start-up weighs; above, the quadratic term), and splitting pays from
# about a thousand objects.
PART_OBJECTS = 250
SPLIT_MIN_OBJECTS = 1000


@dataclass(frozen=True, slots=True)
class SplitPlan:
    """A root that may be built in parts: its ``resources`` entries' estimated objects (``weights``, in
    order), the name affixes its kustomizations add (``hint``) and those the root itself adds (``top``).
    The wrappers are written from the generated kustomization text (:attr:`.reach.Reach.generated`)."""

    weights: tuple[int, ...]
    hint: BatchHint
    top: BatchHint
    # for reusing a part's output (:meth:`.build.KustomizeBuilder.build_split`): per entry, the digest of
    # the file it names when nothing else in the build reads that file (else None), and a digest of
    # everything else the build can read
    owned: tuple[str | None, ...] = ()
    shared: str = ""

    @property
    def objects(self) -> int:
        return sum(self.weights)


def split_plan(top: Mapping[str, Any], hint: BatchHint | None, weights: Sequence[int], *,
               top_revisited: bool, owned: Sequence[str | None] = (), shared: str = "") -> SplitPlan | None:
    """The plan when the root whose generated kustomization is ``top`` may be built in parts (see the
    module docstring), else None. ``weights``: the estimated objects of each ``resources`` entry."""
    resources = top.get("resources")
    if (
        hint is None
        or top_revisited
        or not set(top) <= SPLIT_FIELDS
        or not isinstance(resources, list)
        or len(resources) < 2
        or len(weights) != len(resources)
        or not all(isinstance(r, str) and r for r in resources)
    ):
        return None
    for patch in top.get("patches") or ():
        if not isinstance(patch, dict) or not isinstance(patch.get("target"), dict) or not patch["target"]:
            return None
    for key in _GENERATORS:
        for gen in top.get(key) or ():
            if not isinstance(gen, dict) or gen.get("behavior", "create") not in ("", "create"):
                return None
    affixes = [frozenset({v}) if isinstance(v := top.get(key), str) and v else frozenset()
               for key in ("namePrefix", "nameSuffix")]
    return SplitPlan(weights=tuple(weights), hint=hint, top=BatchHint(prefixes=affixes[0], suffixes=affixes[1]),
                     owned=tuple(owned), shared=shared)


def partition(weights: Sequence[int], part_objects: int) -> list[range]:
    """Contiguous slices of the entries, each about ``part_objects`` objects and as even as the entries
    allow (at least two slices, at most one per entry)."""
    count = min(len(weights), max(2, math.ceil(sum(weights) / max(1, part_objects))))
    slices: list[range] = []
    start = 0
    running = 0
    left = sum(weights)  # the weight of the entries not yet in a slice
    for index, weight in enumerate(weights):
        running += weight
        parts_left = count - len(slices)
        if parts_left > 1 and (running * parts_left >= left or len(weights) - index - 1 == parts_left - 1):
            slices.append(range(start, index + 1))
            start, left, running = index + 1, left - running, 0
    slices.append(range(start, len(weights)))
    return slices


def _moved(entry: str, directory: Path, wrapper: Path) -> str:
    """``entry`` (relative to ``directory``, cleaned lexically as kustomize does) relative to ``wrapper``."""
    return os.path.relpath(os.path.normpath(os.path.join(directory, entry)), wrapper)


def _generator(gen: Mapping[str, Any], directory: Path, wrapper: Path) -> dict[str, Any]:
    out = dict(gen)
    if isinstance(gen.get("files"), list):
        files = []
        for entry in gen["files"]:
            if isinstance(entry, str) and "=" in entry:
                key, _, path = entry.partition("=")
                files.append(f"{key}={_moved(path, directory, wrapper)}")
            elif isinstance(entry, str) and entry:
                files.append(_moved(entry, directory, wrapper))
            else:
                files.append(entry)
        out["files"] = files
    if isinstance(gen.get("envs"), list):
        out["envs"] = [_moved(e, directory, wrapper) if isinstance(e, str) and e else e for e in gen["envs"]]
    if isinstance(gen.get("env"), str) and gen["env"]:
        out["env"] = _moved(gen["env"], directory, wrapper)
    return out


def wrapper_kustomization(top: Mapping[str, Any], entries: Sequence[str], directory: Path, wrapper: Path, *,
                          last: bool) -> dict[str, Any]:
    """The kustomization of one part: ``top`` with ``resources`` = ``entries``, paths rewritten from
    ``directory`` to ``wrapper``, generators only when ``last``."""
    kus: dict[str, Any] = {}
    for key, value in top.items():
        if key == "resources":
            kus[key] = [_moved(e, directory, wrapper) for e in entries]
        elif key in _GENERATORS:
            if last:
                kus[key] = [_generator(g, directory, wrapper) for g in value]
        elif key == "patches":
            kus[key] = [{**p, "path": _moved(p["path"], directory, wrapper)} if isinstance(p.get("path"), str)
                        else dict(p) for p in value]
        else:
            kus[key] = value
    return kus


@dataclass(frozen=True, slots=True)
class Part:
    """A part's wrapper directory and what its output depends on besides the builder (``inputs``: its
    kustomization with paths relative to the root, the digests of the files only it reads, and the
    digest of everything else — the same inputs, the same output)."""

    wrapper: Path
    inputs: str


def _dump(kus: Mapping[str, Any]) -> str:
    return yaml.dump(kus, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False, allow_unicode=True)


def write_parts(generated: str, plan: SplitPlan, directory: Path, base: Path, part_objects: int) -> list[Part]:
    """Write one wrapper directory per part under the (empty) directory ``base`` for the root in
    ``directory`` whose generated kustomization is ``generated``; return the parts."""
    top = yaml.load(generated, Loader=yaml.CSafeLoader)
    resources = top["resources"]
    slices = partition(plan.weights, part_objects)
    parts: list[Part] = []
    for index, part in enumerate(slices):
        wrapper = base / f"part-{index}"
        wrapper.mkdir()
        entries, last = [resources[i] for i in part], index == len(slices) - 1
        (wrapper / "kustomization.yaml").write_text(
            _dump(wrapper_kustomization(top, entries, directory, wrapper, last=last)), encoding="utf-8")
        owned = [plan.owned[i] if i < len(plan.owned) else None for i in part]
        inputs = json.dumps([_dump(wrapper_kustomization(top, entries, directory, directory, last=last)), owned,
                             plan.shared])
        parts.append(Part(wrapper, inputs))
    return parts


@dataclass(slots=True)
class Joined:
    """The parts joined: the output as the whole build prints it, and its documents (already decoded)."""

    output: bytes
    documents: list[Document]


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def check_parts(outputs: Sequence[bytes], plan: SplitPlan) -> list[list[Document]] | None:
    """Each part's documents when the parts are proven to be the whole build's (module docstring), else
    None. Raises what decoding raises (a :class:`~.errors.ManifestParseError`): the caller then builds
    the whole root."""
    documents = [parse_documents(output) for output in outputs]
    owners: dict[tuple[str, str, str], int] = {}
    names: list[list[str]] = []
    for index, docs in enumerate(documents):
        part_names = []
        for doc in docs:
            name = doc.obj["metadata"]["name"]
            part_names.append(name)
            group, kind = _group(doc.obj["apiVersion"]), doc.obj["kind"]
            for previous in previous_names(name, plan.top.prefixes, plan.top.suffixes):
                if owners.setdefault((group, kind, previous), index) != index:
                    return None
        names.append(part_names)
    if crossed(outputs, [plan.hint] * len(outputs), names=names):
        return None
    return documents


def join_parts(outputs: Sequence[bytes], documents: Sequence[list[Document]]) -> Joined:
    """The whole output: the parts' documents in order, separated as kustomize separates them."""
    return Joined(output=b"---\n".join(o for o in outputs if o), documents=[d for docs in documents for d in docs])


__all__ = [
    "PART_OBJECTS",
    "SPLIT_FIELDS",
    "SPLIT_MIN_OBJECTS",
    "Joined",
    "Part",
    "SplitPlan",
    "check_parts",
    "join_parts",
    "partition",
    "split_plan",
    "wrapper_kustomization",
    "write_parts",
]
