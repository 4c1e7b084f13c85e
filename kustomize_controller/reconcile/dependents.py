"""Waking dependents: a Kustomization that becomes ready enqueues those whose ``dependsOn`` names it.

Gate ``EnableDependencyQueueing`` (upstream's proposed name, kustomize-controller PR #1412; on by
default here). Without it a dependent learns that its dependency is ready only by polling every
``--requeue-dependency``; with it a chain a → b → c converges in about the sum of its reconcile
times. The poll stays as the fallback (a missed event, a dependency outside the watched scope).

Contract (pure functions over plain objects and the informer's index; the application wires them):
- ``dependency_index_keys(ks)``: ``<namespace>/<name>`` of every ``spec.dependsOn`` entry, the
  namespace defaulting to the dependent's own (as ``checkDependencies`` reads it). Indexed under
  ``DEPENDS_ON_INDEX``.
- ``dependency_update_passes(old, new)``: the update made ``new`` ready for its generation (Ready=True
  and ``observedGeneration == generation``, the built-in dependency check) where ``old`` was not, or
  ``new`` is ready and its ``lastAppliedRevision`` changed (a dependent using the same source waits
  for exactly that). Everything else — progress patches, a re-verification that changes nothing,
  a dependency turning not ready — passes nothing, so no status write can start a cascade. A
  ``readyExpr`` that reads other fields (labels, say) is still served by the poll alone.
- ``DependentWaker.dependents(ks)``: the Kustomizations whose ``dependsOn`` names ``ks``, minus any
  for which waking would go round a cycle: a self-reference, or a dependent that ``ks`` itself
  (transitively) depends on. Those are logged once per (dependency, dependent) pair and left to the
  poll; a cycle can never be satisfied by the built-in check, so waking it would only spin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import structlog

from kustomize_controller.reconcile.ordering import ObjectKey

DEPENDS_ON_INDEX = "dependsOn"

Obj = Mapping[str, Any]

_log = structlog.get_logger("dependents")


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _key(obj: Obj) -> ObjectKey:
    meta = _meta(obj)
    return ObjectKey(str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def dependency_keys(ks: Obj) -> list[ObjectKey]:
    spec = ks.get("spec")
    refs = spec.get("dependsOn") if isinstance(spec, Mapping) else None
    own_namespace = _key(ks).namespace
    keys: list[ObjectKey] = []
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, Mapping) and ref.get("name"):
            keys.append(ObjectKey(str(ref.get("namespace") or own_namespace), str(ref["name"])))
    return keys


def dependency_index_keys(ks: Obj) -> list[str]:
    return sorted({str(key) for key in dependency_keys(ks)})


def _ready_for_generation(ks: Obj) -> bool:
    status = ks.get("status")
    if not isinstance(status, Mapping):
        return False
    if _meta(ks).get("generation") != status.get("observedGeneration"):
        return False
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def _last_applied(ks: Obj) -> Any:
    status = ks.get("status")
    return status.get("lastAppliedRevision") if isinstance(status, Mapping) else None


def dependency_update_passes(old: Obj, new: Obj) -> bool:
    if not _ready_for_generation(new):
        return False
    return not _ready_for_generation(old) or _last_applied(old) != _last_applied(new)


class DependentWaker:
    """Maps a Kustomization that became ready to the dependents to enqueue (module contract).

    ``indexed(key)`` returns the cached Kustomizations indexed under ``DEPENDS_ON_INDEX`` = ``key``;
    ``lookup(key)`` returns a cached Kustomization by ``<namespace>/<name>``. The set of cycles
    already reported lives here, owned by whoever wires the waker (no module state)."""

    def __init__(self, *, indexed: Callable[[str], Iterable[Obj]], lookup: Callable[[str], Obj | None]) -> None:
        self._indexed = indexed
        self._lookup = lookup
        self._reported: set[tuple[ObjectKey, ObjectKey]] = set()

    def dependents(self, ks: Obj) -> list[ObjectKey]:
        changed = _key(ks)
        out: list[ObjectKey] = []
        for dependent in self._indexed(str(changed)):
            key = _key(dependent)
            if key == changed or self._depends_on(changed, key):
                self._report(changed, key)
                continue
            out.append(key)
        return out

    def _depends_on(self, start: ObjectKey, target: ObjectKey) -> bool:
        """True when ``start`` depends on ``target``, directly or through other cached Kustomizations."""
        seen = {start}
        pending = [start]
        while pending:
            current = pending.pop()
            obj = self._lookup(str(current))
            if obj is None:
                continue
            for dep in dependency_keys(obj):
                if dep == target:
                    return True
                if dep not in seen:
                    seen.add(dep)
                    pending.append(dep)
        return False

    def _report(self, dependency: ObjectKey, dependent: ObjectKey) -> None:
        if (dependency, dependent) in self._reported:
            return
        self._reported.add((dependency, dependent))
        _log.error(
            "circular dependency, not waking the dependent (it polls every --requeue-dependency)",
            dependency=str(dependency),
            dependent=str(dependent),
        )


__all__ = [
    "DEPENDS_ON_INDEX",
    "DependentWaker",
    "dependency_index_keys",
    "dependency_keys",
    "dependency_update_passes",
]
