"""Confinement: the controller's security boundary around ``kustomize build``.

kustomize runs with ``--load-restrictor LoadRestrictionsNone`` (overlays may read files outside
their own directory, as upstream allows), so before it runs we walk every kustomization file it
can reach from the build directory and resolve — following symlinks — every local path it could
make kustomize read:

    resources, bases, components (recursively), crds, configurations, openapi.path,
    patches[].path, patchesStrategicMerge (file entries), patchesJson6902[].path,
    replacements[].path, configMapGenerator/secretGenerator files/envs/env,
    transformers/generators/validators (files, directories, inline configs) and the paths inside
    builtin plugin configs (PatchTransformer, PatchJson6902Transformer,
    PatchStrategicMergeTransformer, ReplacementTransformer, ConfigMapGenerator, SecretGenerator).

Any path that lands outside the artifact root fails the build with :class:`ConfinementError`
naming the kustomization file and the offending entry — never anything read from the target.
Remote references (``https://``, ``git::``, ``github.com/...``, ``?ref=``, ...) are refused when
remote bases are disabled; references containing ``file://`` (also ``git::file://``: a clone of
a repository on the controller's disk) are always refused. Helm
(``helmCharts``, ``helmGlobals``, ``HelmChartInflationGenerator``) and non-builtin plugins
(exec, container and Go plugins, KRM functions) are always refused.

The report also notes, for :mod:`.batch` and :mod:`.split`, every top-level field, name prefix and
suffix of the kustomizations visited, whether a ``patches`` entry may rename and whether an entry leads
back to the directory the walk started in (``facts``).

The report also lists what the walk reached (every visited directory and every resolved local
path, present or not, with how many entries resolve to it): :mod:`.reach` uses it to give each
build its own copy of exactly what it can read, and to key the build cache on that content.
``top`` lets the walk start from a kustomization held in memory (the generated one) instead of the
file on disk.

Not promised: the content of remote bases is not inspected here. kustomize itself loads a git
clone with its root-only restrictor (a cloned kustomization cannot read outside the clone, and
its bases must stay inside it), and an HTTP resource is plain YAML; beyond that we trust git and
kustomize — run with ``--no-remote-bases`` where tenants are untrusted. Entries that do not exist
locally and do not look remote are left for kustomize to report.
"""

from __future__ import annotations

import os
import re
import stat
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kustomize_controller.kustomize.batch import WalkFacts
from kustomize_controller.kustomize.errors import ConfinementError
from kustomize_controller.kustomize.paths import find_kustomization_file, relative_to_root, resolve_inside

_REMOTE_PREFIXES = ("git::", "gh:", "ssh://", "https://", "http://", "git@", "github.com:", "github.com/")
_REMOTE_HINT = re.compile(r"://|\?ref=|\?version=|\?submodules=|\.git($|/|\?)|/_git/")
_BUILTIN_KINDS = frozenset(
    {
        "AnnotationsTransformer",
        "ConfigMapGenerator",
        "HashTransformer",
        "IAMPolicyGenerator",
        "ImageTagTransformer",
        "LabelTransformer",
        "NamespaceTransformer",
        "PatchJson6902Transformer",
        "PatchStrategicMergeTransformer",
        "PatchTransformer",
        "PrefixSuffixTransformer",
        "PrefixTransformer",
        "SuffixTransformer",
        "ReplacementTransformer",
        "ReplicaCountTransformer",
        "SecretGenerator",
        "SortOrderTransformer",
        "ValueAddTransformer",
    }
)
_HELM_FIELDS = ("helmCharts", "helmGlobals", "helmChartInflationGenerator")


def looks_remote(entry: str) -> bool:
    lowered = entry.lower()
    return lowered.startswith(_REMOTE_PREFIXES) or bool(_REMOTE_HINT.search(lowered))


@dataclass
class ConfinementReport:
    """What the walk saw: kustomization files visited and remote references allowed through."""

    kustomization_files: list[Path] = field(default_factory=list)
    remote_references: list[str] = field(default_factory=list)
    directories: list[Path] = field(default_factory=list)
    paths: set[Path] = field(default_factory=set)
    references: Counter[Path] = field(default_factory=Counter)  # how many entries resolve to each path
    facts: WalkFacts = field(default_factory=WalkFacts.empty)


class _Walker:
    def __init__(self, root: Path, *, allow_remote: bool) -> None:
        self.root = Path(os.path.realpath(root))
        self.allow_remote = allow_remote
        self.visited: set[str] = set()
        self.top: str | None = None  # the real path of the directory the walk started in
        self.report = ConfinementReport()
        self._real_root = str(self.root)
        self._real_dirs: dict[str, str] = {}  # directory → its real path, for _realpath

    # -- helpers --------------------------------------------------------------------------------

    def _where(self, kfile: Path) -> str:
        return relative_to_root(self.root, kfile)

    def _fail(self, kfile: Path, key: str, entry: str, why: str) -> ConfinementError:
        return ConfinementError(f"{self._where(kfile)}: '{key}' entry '{entry}' {why}")

    def _local(self, kfile: Path, base: Path, key: str, entry: str) -> Path:
        """Resolve a local path entry; refuse it when it leaves the root."""
        if "file://" in entry.lower():
            raise self._fail(kfile, key, entry, "is a local git reference outside the artifact root")
        # kustomize cleans ".." lexically before the OS follows symlinks: check that same path.
        real = Path(self._realpath(os.path.normpath(os.path.join(base, entry))))
        if not self._inside(str(real)):
            raise self._fail(kfile, key, entry, "resolves outside the artifact root")
        self.report.paths.add(real)
        self.report.references[real] += 1
        return real

    def _inside(self, real: str) -> bool:
        return real == self._real_root or real.startswith(self._real_root.rstrip(os.sep) + os.sep)

    def _realpath(self, path: str) -> str:
        """``os.path.realpath(path)`` for a clean absolute ``path``, the real directories above it
        remembered for the walk: a root of 5,000 entries in one directory then costs one ``lstat`` an
        entry instead of one per component of each path (~70,000 in all, ~0.3 s of CPU). The last
        component is followed when it is a symbolic link, as ``realpath`` does (the tree does not
        change during the walk)."""
        parent, name = os.path.split(path)
        if not name or name in (".", ".."):
            return os.path.realpath(path)
        real_parent = self._real_dirs.get(parent)
        if real_parent is None:
            real_parent = self._real_dirs[parent] = os.path.realpath(parent)
        candidate = os.path.join(real_parent, name)
        try:
            mode = os.lstat(candidate).st_mode
        except OSError:
            return candidate  # missing: realpath keeps the name as it is
        return os.path.realpath(candidate) if stat.S_ISLNK(mode) else candidate

    def _maybe_remote(self, kfile: Path, base: Path, key: str, entry: str) -> bool:
        """True when ``entry`` is a remote reference that is allowed; raise if refused."""
        if "file://" in entry.lower():
            raise self._fail(kfile, key, entry, "is a local git reference outside the artifact root")
        if os.path.lexists(base / entry) or not looks_remote(entry):
            return False
        if not self.allow_remote:
            raise self._fail(kfile, key, entry, "is a remote reference and remote bases are disabled")
        self.report.remote_references.append(entry)
        return True

    # -- kustomization files --------------------------------------------------------------------

    def visit_dir(
        self, directory: Path, *, plugin_dir: bool = False, top: tuple[Path, dict[str, Any]] | None = None
    ) -> None:
        real = os.path.realpath(directory)
        if real in self.visited:
            if real == self.top:
                self.report.facts.top_revisited = True
            return
        if self.top is None:
            self.top = real
        self.visited.add(real)
        self.report.directories.append(Path(real))
        kfile = top[0] if top is not None else find_kustomization_file(directory)
        if kfile is None:
            return
        _, inside = resolve_inside(self.root, kfile)
        if not inside:
            raise ConfinementError(f"{self._where(kfile)}: the kustomization file resolves outside the artifact root")
        if top is not None:
            kus: Any = top[1]
        else:
            try:
                kus = yaml.load(kfile.read_bytes(), Loader=yaml.CSafeLoader)
            except yaml.YAMLError as err:
                raise ConfinementError(f"{self._where(kfile)}: invalid YAML: {err}") from err
        self.report.kustomization_files.append(kfile)
        if isinstance(kus, dict):
            self.visit_kustomization(kfile, directory, kus, plugin_dir=plugin_dir)

    def visit_kustomization(
        self, kfile: Path, base: Path, kus: dict[str, Any], *, plugin_dir: bool = False
    ) -> None:
        for key in _HELM_FIELDS:
            if kus.get(key):
                raise ConfinementError(f"{self._where(kfile)}: '{key}' is not supported (helm is disabled)")

        for key in ("resources", "bases", "components"):
            for entry in _strings(kus.get(key)):
                if self._maybe_remote(kfile, base, key, entry):
                    continue
                real = self._local(kfile, base, key, entry)
                if real.is_dir():
                    self.visit_dir(real, plugin_dir=plugin_dir)
                elif plugin_dir and key == "resources" and real.is_file():
                    self._plugin_file(kfile, base, key, entry, real)

        for key in ("crds", "configurations"):
            for entry in _strings(kus.get(key)):
                self._local(kfile, base, key, entry)

        openapi = kus.get("openapi")
        if isinstance(openapi, dict) and isinstance(openapi.get("path"), str):
            self._local(kfile, base, "openapi.path", openapi["path"])

        self.report.facts.record(kus)
        for key in ("patches", "patchesJson6902", "replacements"):
            for item in _dicts(kus.get(key)):
                patch_file: Path | None = None
                if isinstance(item.get("path"), str):
                    patch_file = self._local(kfile, base, f"{key}.path", item["path"])
                if key == "patches":
                    self.report.facts.record_patch(item, _patch_text(item, patch_file))

        for entry in _strings(kus.get("patchesStrategicMerge")):
            if "\n" not in entry and not entry.lstrip().startswith("{"):
                self._local(kfile, base, "patchesStrategicMerge", entry)

        for key in ("configMapGenerator", "secretGenerator"):
            for gen in _dicts(kus.get(key)):
                self._generator_sources(kfile, base, key, gen)

        for key in ("transformers", "generators", "validators"):
            for entry in _strings(kus.get(key)):
                if "\n" in entry:
                    self._plugin_docs(kfile, base, key, entry, _load_docs(kfile, key, entry, self))
                    continue
                if self._maybe_remote(kfile, base, key, entry):
                    continue
                real = self._local(kfile, base, key, entry)
                if real.is_dir():
                    self.visit_dir(real, plugin_dir=True)
                elif real.is_file():
                    self._plugin_file(kfile, base, key, entry, real)

    def _generator_sources(self, kfile: Path, base: Path, key: str, gen: dict[str, Any]) -> None:
        for entry in _strings(gen.get("files")):
            path = entry.split("=", 1)[1] if "=" in entry else entry
            self._local(kfile, base, f"{key}.files", path)
        for entry in _strings(gen.get("envs")):
            self._local(kfile, base, f"{key}.envs", entry)
        env = gen.get("env")
        if isinstance(env, str) and env:
            self._local(kfile, base, f"{key}.env", env)

    # -- plugin configs -------------------------------------------------------------------------

    def _plugin_file(self, kfile: Path, base: Path, key: str, entry: str, real: Path) -> None:
        try:
            docs = list(yaml.load_all(real.read_bytes(), Loader=yaml.CSafeLoader))
        except yaml.YAMLError as err:
            raise self._fail(kfile, key, entry, f"is not valid YAML: {err}") from err
        self._plugin_docs(kfile, base, key, entry, docs)

    def _plugin_docs(self, kfile: Path, base: Path, key: str, entry: str, docs: Iterable[Any]) -> None:
        shown = entry if "\n" not in entry else "<inline>"
        for doc in docs:
            if not isinstance(doc, dict):
                continue
            kind = str(doc.get("kind") or "")
            api_version = str(doc.get("apiVersion") or "")
            if kind == "HelmChartInflationGenerator":
                raise self._fail(kfile, key, shown, "uses HelmChartInflationGenerator (helm is disabled)")
            if api_version != "builtin" or kind not in _BUILTIN_KINDS:
                raise self._fail(
                    kfile, key, shown, f"configures plugin '{api_version}/{kind}' (plugins are disabled)"
                )
            if kind in ("PatchTransformer", "PatchJson6902Transformer") and isinstance(doc.get("path"), str):
                self._local(kfile, base, f"{key}[{kind}].path", doc["path"])
            elif kind == "PatchStrategicMergeTransformer":
                for p in _strings(doc.get("paths")):
                    self._local(kfile, base, f"{key}[{kind}].paths", p)
            elif kind == "ReplacementTransformer":
                for item in _dicts(doc.get("replacements")):
                    if isinstance(item.get("path"), str):
                        self._local(kfile, base, f"{key}[{kind}].replacements.path", item["path"])
            elif kind in ("ConfigMapGenerator", "SecretGenerator"):
                self._generator_sources(kfile, base, f"{key}[{kind}]", doc)


def _patch_text(item: dict[str, Any], real: Path | None) -> str | bytes | None:
    """A ``patches`` entry's patch: inline, or the file's content (None when it cannot be read)."""
    if isinstance(item.get("patch"), str):
        return str(item["patch"])
    if real is None:
        return None
    try:
        return real.read_bytes()
    except OSError:
        return None


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, str) and v]


def _dicts(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, dict)]


def _load_docs(kfile: Path, key: str, entry: str, walker: _Walker) -> list[Any]:
    try:
        return list(yaml.load_all(entry, Loader=yaml.CSafeLoader))
    except yaml.YAMLError as err:
        raise walker._fail(kfile, key, "<inline>", f"is not valid YAML: {err}") from err


def check_confinement(
    root: Path, directory: Path, *, allow_remote: bool, top: tuple[Path, dict[str, Any]] | None = None
) -> ConfinementReport:
    """Walk everything kustomize can read from ``directory``; raise ConfinementError on escape.

    ``top``: ``(kustomization file, its content)`` to use for ``directory`` instead of reading it.
    """
    walker = _Walker(root, allow_remote=allow_remote)
    _, inside = resolve_inside(root, directory)
    if not inside:
        raise ConfinementError(f"'{relative_to_root(root, directory)}' resolves outside the artifact root")
    walker.visit_dir(directory, top=top)
    return walker.report
