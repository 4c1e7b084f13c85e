import pytest
from hypothesis import given
from hypothesis import strategies as st

from kustomize_controller.reconcile.ordering import (
    CircularDependencyError,
    Dependent,
    ObjectKey,
    sort_dependents,
)


def dep(name: str, *deps: str, ns: str = "default") -> Dependent:
    parsed = [(d.split("/")[0], d.split("/")[1]) if "/" in d else (None, d) for d in deps]
    return Dependent(ObjectKey(ns, name), parsed)


def names(keys: list[ObjectKey]) -> list[str]:
    return [str(k) for k in keys]


def test_chain_is_sorted_dependencies_first() -> None:
    out = sort_dependents([dep("app", "infra"), dep("infra", "crds"), dep("crds")])
    assert names(out) == ["default/crds", "default/infra", "default/app"]


def test_independent_items_keep_input_order() -> None:
    assert names(sort_dependents([dep("b"), dep("a"), dep("c")])) == ["default/b", "default/a", "default/c"]


def test_dependencies_outside_the_candidates_are_included() -> None:
    out = sort_dependents([dep("app", "other/infra")])
    assert names(out) == ["other/infra", "default/app"]


def test_cycle_is_reported_with_its_path() -> None:
    with pytest.raises(CircularDependencyError, match="circular dependency detected: default/a -> default/b"):
        sort_dependents([dep("a", "b"), dep("b", "a")])
    with pytest.raises(CircularDependencyError, match="default/self"):
        sort_dependents([dep("self", "self")])


@given(st.lists(st.tuples(st.integers(0, 9), st.lists(st.integers(0, 9), max_size=3)), max_size=12))
def test_acyclic_graphs_respect_every_edge(spec: list[tuple[int, list[int]]]) -> None:
    # Only keep edges to lower numbers: always acyclic.
    items = [dep(f"n{n}", *(f"n{d}" for d in deps if d < n)) for n, deps in spec]
    out = sort_dependents(items)
    position = {k: i for i, k in enumerate(out)}
    assert len(position) == len(out)
    for item in items:
        for ns, name in item.depends_on:
            assert position[ObjectKey(ns or "default", name)] < position[item.key]
