from datetime import UTC, datetime, timedelta

from kustomize_controller.api.meta import Condition, ConditionStatus, ConditionType, Reason
from kustomize_controller.reconcile import conditions as c

T0 = datetime(2026, 5, 1, 10, 0, 0, 500_000, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def test_new_condition_gets_generation_and_whole_second_time() -> None:
    conds: list[Condition] = []
    c.mark_true(conds, "Ready", Reason.RECONCILIATION_SUCCEEDED, "Applied revision: r1", generation=3, now=T0)
    (ready,) = conds
    assert ready.status == ConditionStatus.TRUE
    assert ready.observed_generation == 3
    assert ready.last_transition_time == T0.replace(microsecond=0)
    assert ready.model_dump(by_alias=True)["lastTransitionTime"] == "2026-05-01T10:00:00Z"


def test_transition_time_kept_when_state_unchanged_but_generation_refreshed() -> None:
    conds: list[Condition] = []
    c.mark_true(conds, "Ready", "R", "m", generation=1, now=T0)
    c.mark_true(conds, "Ready", "R", "m", generation=2, now=T1)
    assert conds[0].last_transition_time == T0.replace(microsecond=0)
    assert conds[0].observed_generation == 2


def test_transition_time_changes_on_reason_status_or_message_change() -> None:
    for change in [
        {"reason": "Other"},
        {"message": "other"},
        {"status": ConditionStatus.FALSE},
    ]:
        conds: list[Condition] = []
        c.mark_true(conds, "Ready", "R", "m", generation=1, now=T0)
        args = {"type_": "Ready", "status": ConditionStatus.TRUE, "reason": "R", "message": "m"} | change
        c.set_condition(conds, **args, generation=1, now=T1)  # type: ignore[arg-type]
        assert conds[0].last_transition_time == T1.replace(microsecond=0), change


def test_message_truncated_to_upstream_limit() -> None:
    conds: list[Condition] = []
    c.mark_false(conds, "Ready", "BuildFailed", "x" * 40000, generation=1, now=T0)
    assert len(conds[0].message) == 32768
    assert conds[0].message.endswith("...")
    assert c.trim_message("short") == "short"
    assert c.trim_message("abcdef", limit=1) == "..."


def test_sort_order_owned_types_first_then_generation_then_name() -> None:
    conds: list[Condition] = []
    c.mark_true(conds, "Zeta", "R", "m", generation=1, now=T0)
    c.mark_true(conds, "Alpha", "R", "m", generation=1, now=T0)
    c.mark_true(conds, "Newer", "R", "m", generation=5, now=T0)
    c.mark_true(conds, ConditionType.HEALTHY, "R", "m", generation=1, now=T0)
    c.mark_unknown(conds, ConditionType.READY, "R", "m", generation=1, now=T0)
    c.mark_stalled(conds, "R", "m", generation=1, now=T0)
    assert [x.type for x in conds] == ["Stalled", "Ready", "Newer", "Alpha", "Healthy", "Zeta"]
    c.mark_reconciling(conds, "R", "m", generation=1, now=T0)
    assert [x.type for x in conds][:2] == ["Reconciling", "Ready"]


def test_reconciling_and_stalled_exclude_each_other() -> None:
    conds: list[Condition] = []
    c.mark_reconciling(conds, Reason.PROGRESSING, "working", generation=1, now=T0)
    c.mark_stalled(conds, Reason.ACCESS_DENIED, "blocked", generation=1, now=T0)
    assert c.get(conds, "Reconciling") is None
    assert c.is_true(conds, "Stalled")
    c.mark_reconciling(conds, Reason.PROGRESSING, "again", generation=1, now=T0)
    assert c.get(conds, "Stalled") is None
    assert c.is_true(conds, "Reconciling")


def test_queries_and_delete() -> None:
    conds: list[Condition] = []
    assert c.reason(conds, "Ready") == ""
    assert not c.is_true(conds, "Ready") and not c.is_false(conds, "Ready")
    c.mark_false(conds, "Ready", Reason.BUILD_FAILED, "boom", generation=1, now=T0)
    assert c.is_false(conds, "Ready")
    assert c.reason(conds, "Ready") == "BuildFailed"
    c.delete(conds, "Ready")
    assert conds == []
