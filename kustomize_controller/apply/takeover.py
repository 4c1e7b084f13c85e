"""Metadata cleanup and managed-fields takeover before apply (pure: computes a JSON patch).

Why: server-side apply only reverts fields *we* own. Edits made with ``kubectl edit``/``kubectl apply``
(or by managers named with ``--override-manager``) belong to those managers, so our next apply would
leave them alone. Upstream therefore rewrites ``metadata.managedFields`` so that those entries are merged
into our ``Apply`` entry; the next apply then owns — and reverts — them. Fields owned by any other
manager (HPA, operators, Lens...) are left alone.

Contract (fluxcd/pkg ``ssa`` ``cleanupMetadata`` + ``PatchReplaceFieldsManagers``):
- Nothing is done when the desired or live object selects ``ssa: Merge`` (``CLEANUP_EXCLUSION_SELECTOR``)
  or the object does not exist yet.
- Removed: annotations ``kubectl.kubernetes.io/last-applied-configuration``,
  ``kustomize.toolkit.fluxcd.io/checksum``, ``fluxcd.io/sync-checksum``; label ``fluxcd.io/sync-gc-mark``.
- Taken over (entries without subresource): manager-name *prefix* ``kubectl`` with operation Apply or
  Update, ``before-first-apply`` (Update), the controller's own legacy ``Update`` entry, and every
  ``--override-manager`` (Apply and Update). Their ``fieldsV1`` sets are unioned into the controller's
  ``Apply`` entry (created from the first matching entry when missing), which moves to the end of the
  list; every other entry keeps its position.
- The result is a list of RFC 6902 operations (``remove`` per key, one ``replace`` of
  ``/metadata/managedFields``); an empty list means no patch is needed.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kustomize_controller.apply.jsonpointer import escape
from kustomize_controller.apply.objects import Object, get_annotations, get_labels, metadata
from kustomize_controller.apply.selectors import CLEANUP_EXCLUSION_SELECTOR, Selector, any_in_metadata

CONTROLLER_NAME = "kustomize-controller"
CLEANUP_ANNOTATIONS: tuple[str, ...] = (
    "kubectl.kubernetes.io/last-applied-configuration",
    "kustomize.toolkit.fluxcd.io/checksum",
    "fluxcd.io/sync-checksum",
)
CLEANUP_LABELS: tuple[str, ...] = ("fluxcd.io/sync-gc-mark",)

JsonPatch = list[dict[str, Any]]


@dataclass(frozen=True)
class FieldManagerRule:
    """Managed-fields entries to take over: by manager name (prefix unless ``exact``) and operation."""

    name: str
    operation: str  # "Apply" or "Update"
    exact: bool = False

    def matches(self, entry: dict[str, Any]) -> bool:
        if entry.get("operation") != self.operation or entry.get("subresource"):
            return False
        manager = str(entry.get("manager") or "")
        return manager == self.name if self.exact else manager.startswith(self.name)


def takeover_rules(
    *, controller_name: str = CONTROLLER_NAME, override_managers: Iterable[str] = ()
) -> tuple[FieldManagerRule, ...]:
    """The upstream list: kubectl (Apply, Update), before-first-apply, legacy controller Update, overrides."""
    rules = [
        FieldManagerRule("kubectl", "Apply"),
        FieldManagerRule("kubectl", "Update"),
        FieldManagerRule("before-first-apply", "Update"),
        FieldManagerRule(controller_name, "Update"),
    ]
    for name in override_managers:
        rules.append(FieldManagerRule(name, "Apply"))
        rules.append(FieldManagerRule(name, "Update"))
    return tuple(rules)


@dataclass(frozen=True)
class CleanupOptions:
    annotations: tuple[str, ...] = CLEANUP_ANNOTATIONS
    labels: tuple[str, ...] = CLEANUP_LABELS
    field_managers: tuple[FieldManagerRule, ...] = takeover_rules()
    exclusions: Selector = field(default_factory=lambda: dict(CLEANUP_EXCLUSION_SELECTOR))


def merge_fields(a: Any, b: Any) -> Any:
    """Union of two ``fieldsV1`` trees (nested maps whose leaves are ``{}``)."""
    if not isinstance(a, dict):
        return copy.deepcopy(b)
    if not isinstance(b, dict):
        return copy.deepcopy(a)
    out = copy.deepcopy(a)
    for key, value in b.items():
        out[key] = merge_fields(out[key], value) if key in out else copy.deepcopy(value)
    return out


def managed_fields_takeover(
    entries: Sequence[dict[str, Any]], rules: Sequence[FieldManagerRule], *, manager: str
) -> list[dict[str, Any]] | None:
    """The new managedFields list, or ``None`` when no entry matches ``rules``."""
    own_index: int | None = None
    for i, entry in enumerate(entries):
        if entry.get("manager") == manager and entry.get("operation") == "Apply" and not entry.get("subresource"):
            own_index = i
    merged: dict[str, Any] | None = copy.deepcopy(dict(entries[own_index])) if own_index is not None else None
    kept: list[dict[str, Any]] = []
    edited = False
    for i, entry in enumerate(entries):
        if i == own_index:
            continue
        if any(rule.matches(entry) for rule in rules):
            edited = True
            if merged is None:
                merged = copy.deepcopy(dict(entry))
                merged["manager"] = manager
                merged["operation"] = "Apply"
            else:
                merged["fieldsV1"] = merge_fields(merged.get("fieldsV1"), entry.get("fieldsV1"))
            continue
        kept.append(copy.deepcopy(dict(entry)))
    if not edited or merged is None:
        return None
    kept.append(merged)
    return kept


def cleanup_patch(
    desired: Object, live: Object | None, options: CleanupOptions, *, manager: str = CONTROLLER_NAME
) -> JsonPatch:
    """The JSON patch that cleans ``live`` up before apply (empty when nothing to do or excluded)."""
    if live is None:
        return []
    if any_in_metadata(desired, options.exclusions) or any_in_metadata(live, options.exclusions):
        return []
    ops: JsonPatch = []
    live_annotations = get_annotations(live)
    for key in options.annotations:
        if key in live_annotations:
            ops.append({"op": "remove", "path": f"/metadata/annotations/{escape(key)}"})
    live_labels = get_labels(live)
    for key in options.labels:
        if key in live_labels:
            ops.append({"op": "remove", "path": f"/metadata/labels/{escape(key)}"})
    if options.field_managers:
        current = [e for e in metadata(live).get("managedFields") or [] if isinstance(e, dict)]
        replaced = managed_fields_takeover(current, options.field_managers, manager=manager)
        if replaced is not None:
            ops.append({"op": "replace", "path": "/metadata/managedFields", "value": replaced})
    return ops
