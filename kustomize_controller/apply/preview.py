"""Preview of an apply: what the engine would create, configure, recreate, leave or prune — writing nothing.

Contract:
- ``DryRunClient`` wraps the client every preview request goes through: reads pass, a server-side
  apply, a patch (MigrateAPIVersion's managed-fields rewrite) or a delete is sent with ``dryRun=All``
  whatever the caller asked; it offers no other write. It is the one choke point that makes a preview
  write nothing to the cluster, for every object and every Kustomization setting (``force``,
  ``prune``, ``MigrateAPIVersion``).
- ``preview_apply`` is the engine's phase A (``ResourceManager.plan_all``): one GET and one dry-run per
  object. An object the set itself makes possible — in a Namespace, or of a kind defined by a CRD,
  that the same set creates — cannot be dry-run before they exist; it is reported ``created``,
  unvalidated, as the staged apply would create it after them. Each change carries the digest of
  its desired manifest and, when configured, the paths that differ: what a plan id is made of
  (``reconcile/gate/plan.py``) — and the ``resourceVersion`` of the live object it was computed
  against (``live_version``, ``""`` when absent), read by that same GET. A dry-run failing on an immutable
  field of an object with ``force`` is reported as a recreate. Callers pass no ``detect_only``
  policy: a preview shows every drift as the change it is (``drift-detection: warn`` does not hide it).
- ``preview_prune`` is the controller's prune selection (``prune.delete_all``) with dry-run deletes:
  only objects of the previous inventory, still carrying our owner labels and not excluded, are
  reported ``deleted``, with the ``resourceVersion`` prune's own GET read. An object already gone is not
  listed: deleting it writes nothing (prune only drops it from the inventory).
- ``render_diff`` is pure: the live object and the dry-run result without server noise
  (``managedFields``, ``resourceVersion``, ``uid``, ``generation``, ``creationTimestamp``, ``selfLink``,
  ``status``) and without ``spec.ignore`` paths, as YAML, in unified diff form. Secret ``data`` and
  ``stringData`` values are masked: ``***`` when equal on both sides, ``*** (before)``/``*** (after)``
  when they differ, so a change shows without its value.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from kustomize_controller.apply.changeset import Action
from kustomize_controller.apply.client import ApplyClient, PatchType
from kustomize_controller.apply.detect_only import drifted_paths
from kustomize_controller.apply.drift import IgnoreRule, ignored_paths, strip_paths
from kustomize_controller.apply.errors import PruneError
from kustomize_controller.apply.manager import ApplyOptions, PlannedObject, ResourceManager
from kustomize_controller.apply.objects import Object, ObjRef, deep_copy, resource_version, split_api_version
from kustomize_controller.apply.prune import StaleObject, delete_all
from kustomize_controller.apply.staging import is_crd
from kustomize_controller.apply.verified import fingerprint
from kustomize_controller.kube.discovery import NoKindMatchError
from kustomize_controller.kube.errors import NotFoundError

RECREATED = "recreated"  # the preview's name for a configure by delete and re-create
_NOISE = ("managedFields", "resourceVersion", "uid", "generation", "creationTimestamp", "selfLink")
MASK = "***"


class DryRunClient:
    """An ``ApplyClient`` that only reads and dry-runs (module contract)."""

    def __init__(self, client: ApplyClient) -> None:
        self._client = client

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        return await self._client.get(api_version, kind, name, namespace)

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> list[dict[str, Any]]:
        return await self._client.list(api_version, kind, namespace, label_selector=label_selector,
                                       field_selector=field_selector, metadata_only=metadata_only)

    async def apply(
        self,
        obj: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        dry_run: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        return await self._client.apply(obj, field_manager=field_manager, force=force, dry_run=True,
                                        subresource=subresource)

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        body: Any,
        *,
        patch_type: PatchType,
        field_manager: str | None = None,
        force: bool | None = None,
        dry_run: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        return await self._client.patch(api_version, kind, name, namespace, body, patch_type=patch_type,
                                         field_manager=field_manager, force=force, dry_run=True,
                                         subresource=subresource)

    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any] | None:
        return await self._client.delete(
            api_version, kind, name, namespace, propagation_policy=propagation_policy, dry_run=True
        )


@dataclass(frozen=True)
class PreviewChange:
    """One object of a preview: ``action`` is created/configured/recreated/unchanged/skipped/deleted."""

    ref: ObjRef
    api_version: str
    action: str
    diff: str = ""
    error: str = ""
    note: str = ""
    desired: str = ""  # digest of the desired manifest (created/configured/recreated), for plan ids
    paths: tuple[str, ...] = ()  # configured: the field paths that differ (``detect_only.drifted_paths``)
    live_version: str = ""  # the live object's resourceVersion the change was computed against ("": absent)

    @property
    def changed(self) -> bool:
        return self.action in (Action.CREATED, Action.CONFIGURED, RECREATED, Action.DELETED)


def _created_by_set(planned: Sequence[PlannedObject]) -> tuple[set[str], set[tuple[str, str]]]:
    """Namespaces and (group, kind) pairs the set creates (objects not live yet)."""
    namespaces: set[str] = set()
    kinds: set[tuple[str, str]] = set()
    for plan in planned:
        if plan.live is not None:
            continue
        if plan.ref.kind == "Namespace" and not plan.ref.group:
            namespaces.add(plan.ref.name)
        elif is_crd(plan.desired):
            names = (plan.desired.get("spec") or {}).get("names") or {}
            kinds.add((str((plan.desired.get("spec") or {}).get("group") or ""), str(names.get("kind") or "")))
    return namespaces, kinds


def _enabled_by_set(plan: PlannedObject, namespaces: set[str], kinds: set[tuple[str, str]]) -> bool:
    cause = plan.error.__cause__ if plan.error is not None else None
    if isinstance(cause, NoKindMatchError):
        return (plan.ref.group, plan.ref.kind) in kinds
    if isinstance(cause, NotFoundError) and plan.live is None:
        return plan.ref.namespace in namespaces or (plan.ref.group, plan.ref.kind) in kinds
    return False


async def preview_apply(
    manager: ResourceManager, objects: Sequence[Object], options: ApplyOptions
) -> list[PreviewChange]:
    """Phase A for every object, as preview changes (module contract); ``manager`` uses a ``DryRunClient``."""
    planned = await manager.plan_all(objects, options)
    namespaces, kinds = _created_by_set(planned)
    out: list[PreviewChange] = []
    for plan in planned:
        api_version = str(plan.desired.get("apiVersion") or "")
        desired = fingerprint(plan.desired, context="")
        live_version = resource_version(plan.live) if plan.live is not None else ""
        if plan.error is not None:
            if _enabled_by_set(plan, namespaces, kinds):
                out.append(PreviewChange(ref=plan.ref, api_version=api_version, action=Action.CREATED,
                                         note="not validated: needs objects this revision creates first",
                                         desired=desired))
            else:
                out.append(PreviewChange(ref=plan.ref, api_version=api_version, action=Action.UNKNOWN,
                                         error=str(plan.error)))
            continue
        if plan.recreate:
            out.append(PreviewChange(ref=plan.ref, api_version=api_version, action=RECREATED,
                                     note="would be recreated: an immutable field changed and force is set",
                                     desired=desired, live_version=live_version))
            continue
        diff = note = ""
        paths: tuple[str, ...] = ()
        if plan.action is Action.CONFIGURED and plan.live is not None and plan.dry_run is not None:
            diff = render_diff(plan.ref, plan.live, plan.dry_run, options.ignore_rules)
            paths = tuple(drifted_paths(plan.live, plan.dry_run, options.ignore_rules))
            if not diff:
                note = "field managers only: fields of kubectl, legacy or overridden managers would be taken over"
        out.append(PreviewChange(ref=plan.ref, api_version=api_version, action=str(plan.action), diff=diff,
                                 note=note, desired=desired, paths=paths, live_version=live_version))
    return out


async def preview_prune(
    client: ApplyClient, stale: Sequence[StaleObject], *, owner: Mapping[str, str]
) -> tuple[list[PreviewChange], str]:
    """What prune would delete (module contract), and prune's error message (``""`` when none).

    Objects prune would leave (not ours any more, excluded) are not listed."""
    reader = _ReadVersions(client)
    gone: set[ObjRef] = set()
    try:
        change_set = await delete_all(reader, stale, owner=owner, already_gone=lambda s: gone.add(s.ref))
        errors = ""
    except PruneError as exc:  # the other objects were still looked at
        change_set, errors = exc.change_set, exc.message
    out = [
        PreviewChange(ref=e.ref, api_version=StaleObject(ref=e.ref, version=e.version).api_version,
                      action=str(e.action), live_version=reader.versions.get(e.ref, ""))
        for e in change_set
        if e.action is Action.DELETED and e.ref not in gone
    ]
    return out, errors


class _ReadVersions(DryRunClient):
    """A ``DryRunClient`` noting the ``resourceVersion`` of every object it read (prune's GET of each)."""

    def __init__(self, client: ApplyClient) -> None:
        super().__init__(client)
        self.versions: dict[ObjRef, str] = {}

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        obj = await super().get(api_version, kind, name, namespace)
        group, _ = split_api_version(api_version)
        self.versions[ObjRef(group=group, kind=kind, namespace=namespace or "", name=name)] = resource_version(obj)
        return obj


# --- rendering (pure) -----------------------------------------------------------------------------


def clean(obj: Object, rules: Sequence[IgnoreRule] = (), *, match: Object | None = None) -> Object:
    """``obj`` without server noise and ``spec.ignore`` paths (``match`` selects the rules)."""
    out = deep_copy(obj)
    out.pop("status", None)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        for key in _NOISE:
            meta.pop(key, None)
    paths = ignored_paths(rules, match if match is not None else obj) if rules else []
    return strip_paths(out, paths) if paths else out


def mask_secrets(live: Object, merged: Object) -> tuple[Object, Object]:
    """Mask the values of a Secret's ``data``/``stringData`` on both sides (module contract)."""
    if live.get("kind") != "Secret" or str(live.get("apiVersion") or "") != "v1":
        return live, merged
    live, merged = deep_copy(live), deep_copy(merged)
    for field in ("data", "stringData"):
        before = live.get(field) if isinstance(live.get(field), dict) else None
        after = merged.get(field) if isinstance(merged.get(field), dict) else None
        for key in set(before or {}) | set(after or {}):
            same = before is not None and after is not None and key in before and key in after \
                and before[key] == after[key]
            if before is not None and key in before:
                before[key] = MASK if same else f"{MASK} (before)"
            if after is not None and key in after:
                after[key] = MASK if same else f"{MASK} (after)"
    return live, merged


def _yaml(obj: Object) -> list[str]:
    return yaml.safe_dump(obj, sort_keys=True, default_flow_style=False, allow_unicode=True).splitlines(keepends=True)


def render_diff(ref: ObjRef, live: Object, dry_run: Object, rules: Sequence[IgnoreRule] = ()) -> str:
    """Unified diff of the live object and the dry-run result (module contract)."""
    before, after = mask_secrets(clean(live, rules, match=dry_run), clean(dry_run, rules))
    lines = difflib.unified_diff(_yaml(before), _yaml(after), fromfile=f"{ref} (live)", tofile=f"{ref} (merged)")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
