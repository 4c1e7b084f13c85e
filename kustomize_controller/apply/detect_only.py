"""Detect-only drift: the apply engine's hook for leaving drifted objects as they are (pure parts).

The engine (``manager.py``) plans an object ``configured`` when its server-side dry-run differs from
the live object. That difference has two possible causes: the desired state changed (a new revision)
or the live object was changed out of band (drift). With a ``DriftPolicy`` in ``ApplyOptions.detect_only``
the engine asks, for every object it would write, whether its desired state is unchanged since it was
last applied; when it is, the object is **not written** (no apply, no managed-fields cleanup, no
delete-and-recreate, no re-create of an object deleted out of band), is planned ``unchanged``
(``skipped`` when deleted) and is handed to ``DriftPolicy.held`` as a ``HeldDrift`` with the field
paths that differ. Objects new to the desired state, or whose desired state changed, are written as
usual (for an object that does not exist, "unchanged" can only be true when it was applied before).
Who answers "unchanged since last applied" is the caller's business (``reconcile/drift_mode.py``
keeps that record).

``drifted_paths`` lists what differs between the live object and the dry-run result, in the terms a
user edits: dotted paths with list indexes (``spec.replicas``, ``spec.template.spec.containers[0].image``,
``metadata.labels.team``). It compares what ``drift.has_drifted`` compares — labels, annotations and
everything outside ``metadata`` and ``status`` — after removing the ``spec.ignore`` paths, and names the
shallowest differing node (a removed map names the map). Not promised: list items are compared by
index, so an item inserted at the front names every later index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kustomize_controller.apply.drift import IgnoreRule, ignored_paths, strip_paths
from kustomize_controller.apply.objects import Object, ObjRef, get_annotations, get_labels, semantic_equal

MAX_PATHS = 20  # per object: a log line and an event stay readable even for a replaced object


@dataclass(frozen=True, slots=True)
class HeldDrift:
    """An object left drifted: its identity, the API version it was handled with, what differs."""

    ref: ObjRef
    version: str
    paths: tuple[str, ...]
    recreate: bool = False  # applying it would have needed a delete and re-create (immutable field)
    deleted: bool = False  # it was applied before and no longer exists

    def describe(self) -> str:
        """``Kind/namespace/name (path, path)`` for logs and events."""
        if self.deleted:
            what = "deleted"
        elif self.paths:
            what = ", ".join(self.paths)
        else:
            what = "immutable fields" if self.recreate else "unknown fields"
        return f"{self.ref} ({what})"


class DriftPolicy(Protocol):
    """The engine's collaborator in detect-only mode (see the module contract)."""

    def unchanged(self, ref: ObjRef, desired: Object, *, live: Object | None, dry_run: Object | None) -> bool:
        """True when ``desired`` is what was last applied to ``ref``: then its drift is not corrected.

        ``live`` and ``dry_run`` are the objects the engine compared (None: absent, or the dry-run
        failed), for policies that read what the server says was applied (``ownership.py``)."""
        ...

    def held(self, drift: HeldDrift) -> None:
        """Record an object that was left drifted."""
        ...


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _diff(live: Any, desired: Any, prefix: str, out: list[str]) -> None:
    if len(out) >= MAX_PATHS or semantic_equal(live, desired):
        return
    if isinstance(live, dict) and isinstance(desired, dict):
        for key in sorted(set(live) | set(desired), key=str):
            if key not in live or key not in desired:
                if len(out) < MAX_PATHS:
                    out.append(_join(prefix, str(key)))
                continue
            _diff(live[key], desired[key], _join(prefix, str(key)), out)
        return
    if isinstance(live, list) and isinstance(desired, list):
        for index in range(max(len(live), len(desired))):
            path = f"{prefix}[{index}]"
            if index >= len(live) or index >= len(desired):
                if len(out) < MAX_PATHS:
                    out.append(path)
                continue
            _diff(live[index], desired[index], path, out)
        return
    out.append(prefix or ".")


def drifted_paths(live: Object, dry_run: Object, rules: Sequence[IgnoreRule] = ()) -> list[str]:
    """The paths at which ``live`` differs from the ``dry_run`` result (module contract), at most ``MAX_PATHS``."""
    paths = ignored_paths(rules, dry_run) if rules else []
    if paths:
        live = strip_paths(live, paths)
        dry_run = strip_paths(dry_run, paths)
    out: list[str] = []
    _diff(get_labels(live), get_labels(dry_run), "metadata.labels", out)
    _diff(get_annotations(live), get_annotations(dry_run), "metadata.annotations", out)
    live_body = {k: v for k, v in live.items() if k not in ("metadata", "status")}
    dry_body = {k: v for k, v in dry_run.items() if k not in ("metadata", "status")}
    _diff(live_body, dry_body, "", out)
    return out
