"""Waking dependents: a Kustomization that becomes ready enqueues those whose ``dependsOn`` names it.

Gate ``EnableDependencyQueueing`` (upstream's proposed name, kustomize-controller PR #1412; on by
default here). Without it a dependent learns that its dependency is ready only by polling every
``--requeue-dependency``; with it a chain a → b → c converges in about the sum of its reconcile
times. The poll stays as the fallback (a missed event, a dependency outside the watched scope).

Contract (pure functions over plain objects and the informer's index; the application wires them):
- ``dependency_index_keys(ks)``: ``<namespace>/<name>`` of every ``spec.dependsOn`` entry, the
  namespace defaulting to the dependent's own (``ordering.dependency_keys``, the reading the watches'
  dependency sort and ``checkDependencies`` share). Indexed under ``DEPENDS_ON_INDEX``.
- ``dependency_update_passes(old, new)``: the update made ``new`` ready for its generation (Ready=True
  and ``observedGeneration == generation``, the built-in dependency check) where ``old`` was not, or
  ``new`` is ready and its ``lastAppliedRevision`` changed (a dependent using the same source waits
  for exactly that). Everything else — progress patches, a re-verification that changes nothing,
  a dependency turning not ready — passes nothing, so no status write can start a cascade. A
  ``readyExpr`` that reads other fields (labels, say) is still served by the poll alone.
- ``DependentWaker.dependents(ks)``: the Kustomizations whose ``dependsOn`` names ``ks``, minus any
  for which waking would go round a cycle: a self-reference, or a dependent that ``ks`` itself
  (transitively) depends on. Those are logged once per (dependency, dependent) pair and left to the
  poll; a cycle can never be satisfied by the built-in check, so waking it would only spin. What
  ``ks`` depends on is walked once per event (through the cache; a dependency missing from it ends
  that branch), and only when something is indexed under it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import structlog

from kustomize_controller.reconcile.ordering import ObjectKey, dependency_keys, object_key

DEPENDS_ON_INDEX = "dependsOn"

Obj = Mapping[str, Any]

_log = structlog.get_logger("dependents")


def dependency_index_keys(ks: Obj) -> list[str]:
    return sorted({str(key) for key in dependency_keys(ks)})


def _ready_for_generation(ks: Obj) -> bool:
    status, meta = ks.get("status"), ks.get("metadata")
    if not isinstance(status, Mapping):
        return False
    if (meta.get("generation") if isinstance(meta, Mapping) else None) != status.get("observedGeneration"):
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
        changed = object_key(ks)
        indexed = [object_key(dependent) for dependent in self._indexed(str(changed))]
        if not indexed:
            return []
        ancestors = self._ancestors(changed)  # once per event, whatever the number of dependents
        out: list[ObjectKey] = []
        for key in indexed:
            if key == changed or key in ancestors:
                self._report(changed, key)
                continue
            out.append(key)
        return out

    def _ancestors(self, start: ObjectKey) -> set[ObjectKey]:
        """Every Kustomization ``start`` depends on, directly or through other cached Kustomizations
        (``start`` itself only when it is on a cycle)."""
        seen: set[ObjectKey] = set()
        pending = [start]
        while pending:
            obj = self._lookup(str(pending.pop()))
            if obj is None:
                continue
            for dep in dependency_keys(obj):
                if dep not in seen:
                    seen.add(dep)
                    pending.append(dep)
        return seen

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
    "dependency_update_passes",
]
