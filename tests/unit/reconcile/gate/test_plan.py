"""Plans: only writes count, the id follows what would be written and nothing else."""

from __future__ import annotations

from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.apply.preview import PreviewChange
from kustomize_controller.reconcile.gate.plan import plan_id_in, plan_of


def change(name: str, action: str, *, desired: str = "d1", paths: tuple[str, ...] = (),
           diff: str = "") -> PreviewChange:
    return PreviewChange(ref=ObjRef(group="", kind="ConfigMap", namespace="apps", name=name), api_version="v1",
                         action=action, desired=desired, paths=paths, diff=diff)


def test_counts_and_text() -> None:
    plan = plan_of("main@sha1:abc", [change("a", "created"), change("b", "created"), change("c", "configured"),
                                      change("d", "unchanged"), change("e", "skipped"), change("f", "deleted")])
    assert plan.counts_text() == "2 created, 1 configured, 1 deleted"
    assert len(plan.id) == 12 and not plan.empty
    assert plan.describe() == f"plan {plan.id} (2 created, 1 configured, 1 deleted)"
    assert plan_of("r", [change("d", "unchanged")]).empty
    assert plan_of("r", []).counts_text() == "no changes"


def test_the_id_is_stable_and_order_free() -> None:
    one = plan_of("r", [change("a", "created"), change("b", "configured", paths=("data.x",))])
    two = plan_of("r", [change("b", "configured", paths=("data.x",)), change("a", "created"), change("z", "unchanged")])
    assert one.id == two.id


def test_the_id_changes_with_what_would_be_written() -> None:
    base = plan_of("r1", [change("a", "configured", paths=("data.x",))])
    assert plan_of("r2", [change("a", "configured", paths=("data.x",))]).id != base.id  # a newer revision
    assert plan_of("r1", [change("a", "configured", desired="d2", paths=("data.x",))]).id != base.id  # new content
    assert plan_of("r1", [change("a", "configured", paths=("data.x", "data.y"))]).id != base.id  # new drift
    assert plan_of("r1", [change("a", "configured", paths=("data.x",)), change("b", "deleted")]).id != base.id
    # the rendered diff (live values, context lines) is not part of it
    assert plan_of("r1", [change("a", "configured", paths=("data.x",), diff="-x: 1\n+x: 2\n")]).id == base.id


def test_plan_id_in_a_condition_message() -> None:
    plan = plan_of("r", [change("a", "created")])
    assert plan_id_in(f"Approval required for revision r: {plan.describe()}; approve ...") == plan.id
    assert plan_id_in("No changes to approve") == ""
