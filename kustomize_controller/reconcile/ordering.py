"""Dependency order for enqueueing Kustomizations (fluxcd/pkg ``runtime/dependency.Sort``).

When one event maps to many Kustomizations (a source's new revision, a watched ConfigMap), they are
enqueued dependencies first, so that a chain converges in one pass instead of a cascade of
``--requeue-dependency`` waits.

Contract:
- Depth-first topological order: every dependency comes before its dependents. Dependencies that
  were not among the candidates are included too (at their place in the order), as upstream does.
- Candidates keep their relative input order where the graph does not constrain it.
- ``dependsOn`` entries without a namespace mean the dependent's namespace.
- A cycle is an error naming it: ``circular dependency detected: a/x -> a/y -> a/x``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple


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


def sort_dependents(dependents: Iterable[Dependent]) -> list[ObjectKey]:
    vertices: list[ObjectKey] = []
    edges: dict[ObjectKey, list[ObjectKey]] = {}
    for dependent in dependents:
        vertices.append(dependent.key)
        edges.setdefault(dependent.key, []).extend(
            ObjectKey(namespace or dependent.key.namespace, name) for namespace, name in dependent.depends_on
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
