"""``bench/chaos.py``: the seeded schedule, the apps' revisions and the oracle that judges the end state
(the soak itself is bench-only: real processes and random timing are not a deterministic test)."""

from __future__ import annotations

from typing import Any

from bench import chaos
from bench.workload import APPS_NS, FLUX_NS
from kustomize_controller.apply.selectors import NAME_LABEL, NAMESPACE_LABEL
from kustomize_controller.kustomize.parse import parse_documents


def test_the_schedule_comes_from_the_seed_alone() -> None:
    plan = chaos.ChaosPlan(duration=300, fault_every=10, seed=7)
    schedule = plan.schedule()
    assert schedule == chaos.ChaosPlan(duration=300, fault_every=10, seed=7).schedule()
    assert schedule != chaos.ChaosPlan(duration=300, fault_every=10, seed=8).schedule()
    assert all(0 < at < 300 for at, _ in schedule) and [at for at, _ in schedule] == sorted(at for at, _ in schedule)
    assert {kind for _, kind in schedule} == set(chaos.FAULTS)


def test_each_revision_updates_adds_and_prunes() -> None:
    one, two = (set(chaos.expected_objects(4, rev)) for rev in (1, 2))
    assert ("ConfigMap", "app-4") in one & two  # updated
    assert ("ConfigMap", "app-4-r2") in two - one and ("ConfigMap", "app-4-r1") in one - two  # added, pruned
    assert ("ServiceAccount", "app-4-sa0") in two - one  # the other one in turn
    docs = [d.obj for d in parse_documents(chaos.app_files(4, 2)["app.yaml"])]
    assert {(d["kind"], d["metadata"]["name"]): d.get("data", {}) for d in docs} == chaos.expected_objects(4, 2)
    assert {d["metadata"]["namespace"] for d in docs} == {APPS_NS}


def ks(i: int, revision: str, *, ready: str = "True", ids: list[str] | None = None) -> dict[str, Any]:
    rev = int(revision.removeprefix("r"))
    entries = ids if ids is not None else [f"{APPS_NS}_{n}__{k}" for k, n in chaos.expected_objects(i, rev)]
    return {"metadata": {"name": f"app-{i}"}, "status": {
        "lastAppliedRevision": revision, "inventory": {"entries": [{"id": e, "v": "v1"} for e in entries]},
        "conditions": [{"type": "Ready", "status": ready}]}}


def objects(i: int, rev: int) -> list[dict[str, Any]]:
    labels = {NAME_LABEL: f"app-{i}", NAMESPACE_LABEL: FLUX_NS}
    return [{"kind": kind, "metadata": {"name": name, "labels": labels}, **({"data": data} if data else {})}
            for (kind, name), data in chaos.expected_objects(i, rev).items()]


def test_the_oracle_accepts_exactly_the_last_revisions() -> None:
    revisions = {0: (3, "r3"), 1: (1, "r1")}
    assert not chaos.diverged([ks(0, "r3"), ks(1, "r1")], objects(0, 3) + objects(1, 1), revisions)


def test_the_oracle_finds_what_is_lost_orphaned_or_stuck() -> None:
    revisions = {0: (3, "r3"), 1: (2, "r2")}
    live = objects(0, 3) + objects(1, 2)
    live[0]["data"] = {"revision": "2"}  # the updated ConfigMap kept an older content
    del live[1]  # app-0-r3 never applied
    live += [objects(1, 1)[1], {"kind": "ConfigMap", "metadata": {"name": "unrelated"}}]  # app-1-r1 not pruned
    found = chaos.diverged([ks(0, "r3"), ks(1, "r1")], live, revisions)
    assert found.lost == [f"ConfigMap/{APPS_NS}/app-0: data {{'revision': '2'}}",
                          f"ConfigMap/{APPS_NS}/app-0-r3: absent"]
    assert found.orphaned == [f"ConfigMap/{APPS_NS}/app-1-r1"]
    assert found.stuck == ["app-1: Ready=True at r1"]

    wrong_inventory = ks(0, "r3", ids=[f"{APPS_NS}_app-0__ConfigMap"])
    found = chaos.diverged([wrong_inventory, ks(1, "r2", ready="False")], objects(0, 3) + objects(1, 2), revisions)
    assert len(found.stuck) == 2 and "inventory" in found.stuck[0] and "Ready=False" in found.stuck[1]
    assert not found.lost and not found.orphaned
