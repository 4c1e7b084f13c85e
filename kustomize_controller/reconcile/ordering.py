"""Dependency order for enqueueing Kustomizations (fluxcd/pkg ``runtime/dependency.Sort``).

When one event maps to many Kustomizations (a source's new revision, a watched ConfigMap), they are
enqueued dependencies first, so that a chain converges in one pass instead of a cascade of
``--requeue-dependency`` waits.

Contract:
- Depth-first topological order: every dependency comes before its dependents. Dependencies that
  were not among the candidates are included too (at their place in the order), as upstream does.
- Candidates keep their relative input order where the graph does not constrain it.
- ``dependsOn`` entries without a namespace mean the dependent's namespace (``reference_key``, the one
  place that rule is written; ``dependency_keys``/``dependent_of`` read it from a plain object for the
  watches, the dependents index and this sort, ``dependencies.py`` from the model).
- A cycle is an error naming it: ``circular dependency detected: a/x -> a/y -> a/x``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple


class ObjectKey(NamedTuple):
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class Dependent(NamedTuple):
    key: ObjectKey
    depends_on: Sequence[tuple[str | None, str]]
    """(namespace or None, name) of each dependency."""


class CircularDependencyError(ValueError):
    pass


def reference_key(namespace: str | None, name: str, *, dependent_namespace: str) -> ObjectKey:
    """The Kustomization a ``dependsOn`` entry names: without a namespace, one in the dependent's."""
    return ObjectKey(namespace or dependent_namespace, name)


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    """``namespace/name`` of a plain object (empty strings where missing)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return ObjectKey(str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def dependency_keys(ks: Mapping[str, Any]) -> list[ObjectKey]:
    """The Kustomizations a plain Kustomization's ``spec.dependsOn`` names, in order; entries that are
    not maps or have no name are passed over."""
    spec = ks.get("spec")
    refs = spec.get("dependsOn") if isinstance(spec, Mapping) else None
    own_namespace = object_key(ks).namespace
    return [
        reference_key(str(ref.get("namespace") or ""), str(ref["name"]), dependent_namespace=own_namespace)
        for ref in (refs if isinstance(refs, list) else [])
        if isinstance(ref, Mapping) and ref.get("name")
    ]


def dependent_of(ks: Mapping[str, Any]) -> Dependent:
    """A plain Kustomization as a vertex of ``sort_dependents``."""
    return Dependent(object_key(ks), [(key.namespace, key.name) for key in dependency_keys(ks)])


def sort_dependents(dependents: Iterable[Dependent]) -> list[ObjectKey]:
    vertices: list[ObjectKey] = []
    edges: dict[ObjectKey, list[ObjectKey]] = {}
    for dependent in dependents:
        vertices.append(dependent.key)
        edges.setdefault(dependent.key, []).extend(
            reference_key(namespace, name, dependent_namespace=dependent.key.namespace)
            for namespace, name in dependent.depends_on
        )

    sorted_keys: list[ObjectKey] = []
    permanent: set[ObjectKey] = set()
    temporary: set[ObjectKey] = set()

    def visit(node: ObjectKey) -> list[ObjectKey]:
        # Iterative DFS would avoid recursion limits, but dependency chains are short in practice
        # (hundreds at most), well under Python's limit.
        temporary.add(node)
        for dep in edges.get(node, ()):
            if dep in permanent:
                continue
            if dep in temporary:
                return [dep, node]
            cycle = visit(dep)
            if cycle:
                return [*cycle, node]
        temporary.discard(node)
        permanent.add(node)
        sorted_keys.append(node)
        return []

    for vertex in vertices:
        if vertex not in permanent and vertex not in temporary:
            cycle = visit(vertex)
            if cycle:
                path = " -> ".join(str(k) for k in reversed(cycle))
                raise CircularDependencyError(f"circular dependency detected: {path}")
    return sorted_keys
