"""kustomization.yaml generation and the Kustomization spec overlays (reference §5.1).

Contract:

- In the build directory the first of ``kustomization.yaml``, ``kustomization.yml``,
  ``Kustomization`` that is a file is loaded; if it lists no ``resources``, ``buildMetadata`` is
  forced to ``[originAnnotations]`` (upstream's guard against kustomize's "kustomization.yaml is
  empty" error — it does add origin annotations to the output).
- Without one, the directory is scanned recursively in lexical order (links to directories are not
  followed, as upstream's ``filepath.Walk``): a subdirectory holding a kustomization file becomes a
  resource and is not descended; every ``.yaml``/``.yml`` file must
  decode as Kubernetes objects ("failed to decode Kubernetes YAML from <file>: ..."), listed as
  ``./rel/path``; nothing found → ``namespace: _placeholder``.
- Overlays, in upstream order: ``targetNamespace`` → ``namespace``, ``namePrefix``,
  ``nameSuffix``, ``patches`` appended, ``components`` appended (local and relative only —
  "component path '<p>' must be local and relative"; missing ones dropped when
  ``ignoreMissingComponents``), legacy ``patchesStrategicMerge``/``patchesJson6902`` appended,
  ``images`` merged by name (v1.9.4 rules: ``newName`` replaced when set; ``newTag`` and
  ``digest`` replaced together when either is set; otherwise appended), ``buildMetadata``
  replaced when non-empty.
- Output order as upstream: Flux runs kustomize's Go API with the reorder option unset, which
  emits resources in input (depth-first) order unless the kustomization sets ``sortOptions``;
  the kustomize and kubectl CLIs default to the legacy kind order instead, so a top-level
  kustomization without ``sortOptions`` gets ``sortOptions: {order: fifo}``.
- The result is written back in place (the working copy is a temp dir; nothing to restore).
- Every file read here is first checked to resolve inside the artifact root.

Upstream round-trips the file through kustomize's typed ``Kustomization`` struct, which drops
unknown top-level keys (kustomize alone would reject them with "json: unknown field") and fills a
missing ``apiVersion``/``kind``; we do the same for the top level.

Not promised: the struct round-trip's effect below the top level (unknown keys inside entries are
kept and reported by kustomize) and its case-insensitive field matching.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kustomize_controller.kustomize.errors import ConfinementError, GenerateError
from kustomize_controller.kustomize.paths import (
    KUSTOMIZATION_FILE_NAMES,
    find_kustomization_file,
    relative_to_root,
    resolve_inside,
)

_REMOTE_PREFIXES = ("git::", "gh:", "ssh://", "https://", "http://", "git@", "github.com:", "github.com/")
# Top-level fields of kustomize's types.Kustomization (api v0.21), plus its TypeMeta.
_KUSTOMIZATION_FIELDS = frozenset(
    {
        "apiVersion", "kind", "metadata", "bases", "buildMetadata", "commonAnnotations", "commonLabels",
        "components", "configMapGenerator", "configurations", "crds", "generatorOptions", "generators",
        "helmChartInflationGenerator", "helmCharts", "helmGlobals", "imageTags", "images", "labels",
        "namePrefix", "nameSuffix", "namespace", "openapi", "patches", "patchesJson6902",
        "patchesStrategicMerge", "replacements", "replicas", "resources", "secretGenerator", "sortOptions",
        "transformers", "validators", "vars",
    }
)
_SELECTOR_FIELDS = ("group", "version", "kind", "name", "namespace", "labelSelector", "annotationSelector")


@dataclass(frozen=True, slots=True)
class Overlay:
    """The spec fields that rewrite kustomization.yaml; JSON-shaped values (see :meth:`from_spec`)."""

    target_namespace: str | None = None
    name_prefix: str | None = None
    name_suffix: str | None = None
    patches: Sequence[Mapping[str, Any]] = ()
    components: Sequence[str] = ()
    ignore_missing_components: bool = False
    patches_strategic_merge: Sequence[Any] = ()
    patches_json6902: Sequence[Mapping[str, Any]] = ()
    images: Sequence[Mapping[str, Any]] = ()
    build_metadata: Sequence[str] = field(default_factory=tuple)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Overlay:
        """Read a Kustomization ``spec`` in its JSON form (aliases, e.g. ``model_dump(by_alias=True)``)."""
        return cls(
            target_namespace=spec.get("targetNamespace"),
            name_prefix=spec.get("namePrefix"),
            name_suffix=spec.get("nameSuffix"),
            patches=tuple(spec.get("patches") or ()),
            components=tuple(spec.get("components") or ()),
            ignore_missing_components=bool(spec.get("ignoreMissingComponents")),
            patches_strategic_merge=tuple(spec.get("patchesStrategicMerge") or ()),
            patches_json6902=tuple(spec.get("patchesJson6902") or ()),
            images=tuple(spec.get("images") or ()),
            build_metadata=tuple(spec.get("buildMetadata") or ()),
        )


def is_local_relative_path(path: str) -> bool:
    """Upstream's component rule: no remote prefixes, not absolute (also after ``file://``)."""
    lowered = path.lower()
    for prefix in _REMOTE_PREFIXES:
        if len(prefix) < len(path) and lowered.startswith(prefix):
            return False
    return not (os.path.isabs(path) or os.path.isabs(lowered.removeprefix("file://")))


def _read_confined(root: Path, path: Path) -> bytes:
    _, inside = resolve_inside(root, path)
    if not inside:
        raise ConfinementError(f"'{relative_to_root(root, path)}' resolves outside the artifact root")
    with _reading(root, path):  # a dangling or looping link
        return path.read_bytes()


def _validate_objects(data: bytes, rel: str) -> None:
    try:
        docs = list(yaml.load_all(data, Loader=yaml.CSafeLoader))
    except yaml.YAMLError as err:
        raise GenerateError(f"failed to decode Kubernetes YAML from {rel}: {err}") from err
    for doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise GenerateError(f"failed to decode Kubernetes YAML from {rel}: document is not an object")
        kind = doc.get("kind")
        if not kind:
            raise GenerateError(f"failed to decode Kubernetes YAML from {rel}: missing kind in object")
        if kind.endswith("List") and isinstance(doc.get("items"), list):
            continue
        if not doc.get("apiVersion"):
            raise GenerateError(f"failed to decode Kubernetes YAML from {rel}: missing apiVersion in object")
        meta = doc.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            raise GenerateError(f"failed to decode Kubernetes YAML from {rel}: missing metadata.name in object")


@contextlib.contextmanager
def _reading(root: Path, path: Path) -> Iterator[None]:
    """OSError from looking at ``path`` (a link to a name too long for the file system, say) as a
    GenerateError naming it relative to the root: the temp directory is no business of the user's."""
    try:
        yield
    except OSError as err:
        failed = Path(os.fsdecode(err.filename)) if isinstance(err.filename, (str, bytes)) else path
        raise GenerateError(f"failed to read {relative_to_root(root, failed)}: {err.strerror or err}") from err


def scan_manifests(root: Path, directory: Path) -> list[str]:
    """Resources for a generated kustomization: ``./rel`` paths in lexical walk order."""
    found: list[str] = []

    def walk(current: Path) -> None:
        with _reading(root, current):
            entries = sorted(os.listdir(current))
        for entry in entries:
            path = current / entry
            with _reading(root, path):
                # a link is not descended, as filepath.Walk upstream (two links to "." were 2**40 paths)
                is_dir = path.is_dir() and not path.is_symlink()
            if is_dir:
                _, inside = resolve_inside(root, path)
                if not inside:
                    raise ConfinementError(
                        f"'{relative_to_root(root, path)}' resolves outside the artifact root"
                    )
                with _reading(root, path):
                    has_kustomization = find_kustomization_file(path) is not None
                if has_kustomization:
                    found.append("./" + path.relative_to(directory).as_posix())
                    continue
                walk(path)
                continue
            if path.suffix not in (".yaml", ".yml"):
                continue
            _validate_objects(_read_confined(root, path), relative_to_root(root, path))
            found.append("./" + path.relative_to(directory).as_posix())

    walk(directory)
    return found


def _selector(target: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if target is None:
        return None
    return {k: target[k] for k in _SELECTOR_FIELDS if target.get(k)}


def apply_overlay(kus: dict[str, Any], overlay: Overlay, *, directory: Path) -> dict[str, Any]:
    """Overlay the spec onto a loaded kustomization dict (mutated and returned)."""
    if overlay.target_namespace is not None:
        kus["namespace"] = overlay.target_namespace
    if overlay.name_prefix is not None:
        kus["namePrefix"] = overlay.name_prefix
    if overlay.name_suffix is not None:
        kus["nameSuffix"] = overlay.name_suffix
    for p in overlay.patches:
        entry: dict[str, Any] = {"patch": p.get("patch", "")}
        target = _selector(p.get("target"))
        if target is not None:
            entry["target"] = target
        kus["patches"] = [*(kus.get("patches") or []), entry]
    for component in overlay.components:
        if not is_local_relative_path(component):
            raise GenerateError(f"component path '{component}' must be local and relative")
        if overlay.ignore_missing_components and not os.path.exists(directory / component):
            continue
        kus["components"] = [*(kus.get("components") or []), component]
    for psm in overlay.patches_strategic_merge:
        raw = psm if isinstance(psm, str) else json.dumps(psm, separators=(",", ":"))
        kus["patchesStrategicMerge"] = [*(kus.get("patchesStrategicMerge") or []), raw]
    for pj in overlay.patches_json6902:
        entry = {"patch": json.dumps(pj.get("patch"), separators=(",", ":"))}
        target = _selector(pj.get("target") or {})
        if target is not None:
            entry["target"] = target
        kus["patchesJson6902"] = [*(kus.get("patchesJson6902") or []), entry]
    if overlay.images:
        images: list[dict[str, Any]] = [dict(i) for i in (kus.get("images") or [])]
        for image in overlay.images:
            name = image.get("name", "")
            existing = next((i for i in images if i.get("name") == name), None)
            if existing is None:
                images.append({k: image[k] for k in ("name", "newName", "newTag", "digest") if image.get(k)})
                continue
            if image.get("newName"):
                existing["newName"] = image["newName"]
            if image.get("newTag") or image.get("digest"):
                for key in ("newTag", "digest"):
                    if image.get(key):
                        existing[key] = image[key]
                    else:
                        existing.pop(key, None)
        kus["images"] = images
    if overlay.build_metadata:
        kus["buildMetadata"] = list(overlay.build_metadata)
    return kus


def render_kustomization(root: Path, directory: Path, overlay: Overlay) -> tuple[Path, dict[str, Any], str]:
    """What :func:`generate` would write, without writing: ``(file, content, YAML text)``.

    Reads only; the build cache runs it on the shared (never written) artifact tree.
    """
    with _reading(root, directory):
        kfile = find_kustomization_file(directory)
    if kfile is not None:
        raw = _read_confined(root, kfile)
        try:
            loaded = yaml.load(raw, Loader=yaml.CSafeLoader)
        except yaml.YAMLError as err:
            raise GenerateError(f"failed to parse {relative_to_root(root, kfile)}: {err}") from err
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise GenerateError(f"failed to parse {relative_to_root(root, kfile)}: not a YAML object")
        kus: dict[str, Any] = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            **{k: v for k, v in loaded.items() if k in _KUSTOMIZATION_FIELDS},
        }
        if not kus.get("resources"):
            kus["buildMetadata"] = ["originAnnotations"]
    else:
        kfile = directory / KUSTOMIZATION_FILE_NAMES[0]
        kus = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization"}
        resources = scan_manifests(root, directory)
        if resources:
            kus["resources"] = resources
        else:
            kus["namespace"] = "_placeholder"
    apply_overlay(kus, overlay, directory=directory)
    if "sortOptions" not in kus and kus.get("kind", "Kustomization") == "Kustomization":
        kus["sortOptions"] = {"order": "fifo"}
    data = yaml.dump(kus, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False, allow_unicode=True)
    return kfile, kus, data


def generate(root: Path, directory: Path, overlay: Overlay) -> Path:
    """Find or generate the kustomization file of ``directory``, overlay the spec, write it back."""
    kfile, _, data = render_kustomization(root, directory, overlay)
    if kfile.is_symlink():
        kfile.unlink()
    kfile.write_text(data, encoding="utf-8")
    return kfile
