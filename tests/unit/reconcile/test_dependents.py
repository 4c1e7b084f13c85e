"""Waking dependents (gate ``EnableDependencyQueueing``): the index keys, the readiness predicate, and
the mapping that never wakes round a cycle."""

from typing import Any

import pytest
import structlog

from kustomize_controller.reconcile.dependents import (
    DependentWaker,
    dependency_index_keys,
    dependency_update_passes,
)
from kustomize_controller.reconcile.ordering import ObjectKey


def ks(name: str, *, namespace: str = "apps", deps: list[dict[str, str]] | None = None, gen: int = 1,
       status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "generation": gen},
            "spec": {"dependsOn": deps or []}, "status": status or {}}


def ready(*, observed: int = 1, revision: str = "r1", state: str = "True") -> dict[str, Any]:
    return {"observedGeneration": observed, "lastAppliedRevision": revision,
            "conditions": [{"type": "Ready", "status": state}]}


def test_index_keys_default_to_the_dependents_namespace() -> None:
    obj = ks("app", deps=[{"name": "base"}, {"name": "infra", "namespace": "flux-system"}, {"name": "base"}])
    assert dependency_index_keys(obj) == ["apps/base", "flux-system/infra"]
    assert dependency_index_keys(ks("app")) == []
    assert dependency_index_keys({"metadata": {"name": "x"}, "spec": {"dependsOn": "junk"}}) == []


@pytest.mark.parametrize(
    ("old", "new", "passes"),
    [
        (ready(state="Unknown"), ready(), True),  # became Ready
        ({}, ready(), True),  # first status ever
        (ready(observed=0), ready(), True),  # ready for the current generation only now
        (ready(), ready(revision="r2"), True),  # applied a new revision
        (ready(), ready(), False),  # a re-verification that changed nothing
        (ready(), ready(state="Unknown"), False),  # progress: not ready
        (ready(), ready(state="False", revision="r2"), False),
        (ready(state="False"), ready(observed=0), False),  # Ready=True for an older generation
    ],
)
def test_update_passes_only_when_ready_for_the_generation(
    old: dict[str, Any], new: dict[str, Any], passes: bool
) -> None:
    assert dependency_update_passes(ks("a", status=old), ks("a", status=new)) is passes


def waker(*objs: dict[str, Any], looked_up: list[str] | None = None) -> DependentWaker:
    by_key = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in objs}

    def indexed(key: str) -> list[dict[str, Any]]:
        return [o for o in objs if key in dependency_index_keys(o)]

    def lookup(key: str) -> dict[str, Any] | None:
        if looked_up is not None:
            looked_up.append(key)
        return by_key.get(key)

    return DependentWaker(indexed=indexed, lookup=lookup)


def test_dependents_in_this_and_other_namespaces() -> None:
    base = ks("base", namespace="infra")
    same = ks("db", namespace="infra", deps=[{"name": "base"}])
    other = ks("app", deps=[{"name": "base", "namespace": "infra"}])
    unrelated = ks("base")  # apps/base, a different object with the same name
    looks_alike = ks("web", deps=[{"name": "base"}])  # apps/base, not infra/base
    w = waker(base, same, other, unrelated, looks_alike)
    assert w.dependents(base) == [ObjectKey("infra", "db"), ObjectKey("apps", "app")]


def test_cycles_and_self_references_are_not_woken_and_logged_once() -> None:
    a = ks("a", deps=[{"name": "c"}])
    b = ks("b", deps=[{"name": "a"}])
    c = ks("c", deps=[{"name": "b"}])
    selfish = ks("self", deps=[{"name": "self"}])
    d = ks("d", deps=[{"name": "a"}])  # depends on the cycle, is not part of it
    w = waker(a, b, c, selfish, d)
    with structlog.testing.capture_logs() as logs:
        assert w.dependents(a) == [ObjectKey("apps", "d")]  # b is in the cycle a -> c -> b -> a
        assert w.dependents(a) == [ObjectKey("apps", "d")]
        assert w.dependents(selfish) == []
        assert w.dependents(selfish) == []
    cycles = [entry for entry in logs if "circular dependency" in entry["event"]]
    assert [(e["dependency"], e["dependent"]) for e in cycles] == [("apps/a", "apps/b"), ("apps/self", "apps/self")]


def test_a_dependency_missing_from_the_cache_ends_the_walk() -> None:
    a = ks("a", deps=[{"name": "gone"}])
    b = ks("b", deps=[{"name": "a"}])
    assert waker(a, b).dependents(a) == [ObjectKey("apps", "b")]


def test_what_the_dependency_depends_on_is_walked_once_per_event() -> None:
    core = ks("core", namespace="infra")
    base = ks("base", namespace="infra", deps=[{"name": "core"}])
    dependents = [ks(f"app{i}", deps=[{"name": "base", "namespace": "infra"}]) for i in range(5)]
    looked_up: list[str] = []
    w = waker(core, base, *dependents, looked_up=looked_up)
    assert w.dependents(base) == [ObjectKey("apps", f"app{i}") for i in range(5)]
    assert sorted(looked_up) == ["infra/base", "infra/core"]  # not once per dependent
    looked_up.clear()
    assert w.dependents(ks("lonely")) == [] and looked_up == []  # no dependents: no walk


def test_a_cycle_across_namespaces_is_not_woken() -> None:
    base = ks("base", namespace="infra", deps=[{"name": "app", "namespace": "apps"}])
    app = ks("app", deps=[{"name": "base", "namespace": "infra"}])
    web = ks("web", deps=[{"name": "base", "namespace": "infra"}])
    with structlog.testing.capture_logs() as logs:
        assert waker(base, app, web).dependents(base) == [ObjectKey("apps", "web")]
    assert [(e["dependency"], e["dependent"]) for e in logs] == [("infra/base", "apps/app")]
