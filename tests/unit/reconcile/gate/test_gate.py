"""The orchestrating module on a fake clock: a hold puts Ready back, schedules the next look at the window's
opening (across a DST change), says it once per plan; an open window or an approved plan goes on."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from kustomize_controller.api.changes import APPROVAL_ANNOTATION, APPROVED_PLAN_ANNOTATION, SYNC_WINDOWS_ANNOTATION
from kustomize_controller.api.kustomization import parse_kustomization
from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.apply.preview import PreviewChange
from kustomize_controller.kube.errors import InternalServerError
from kustomize_controller.reconcile import conditions
from kustomize_controller.reconcile.context import READY, RECONCILING, ReconcileContext
from kustomize_controller.reconcile.gate.approval import record_in
from kustomize_controller.reconcile.gate.gate import (
    PENDING_KEY,
    ChangeGate,
    GateHeld,
    GateOptions,
    GatePlanError,
    GateRecordError,
    approval_used,
    remember_ready,
)
from kustomize_controller.reconcile.gate.plan import plan_id_in
from kustomize_controller.reconcile.status import StatusPatcher
from kustomize_controller.runtime.clock import FakeClock
from tests.unit.reconcile.test_status import FakeClient, doc

APPLIED = "main@sha1:old"
PENDING = "main@sha1:new"
# Europe/Berlin goes from CET to CEST on 2026-03-29 at 02:00 local (01:00 UTC)
BEFORE_DST = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)  # Sunday 00:00 CET


class Notifier:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def emit(self, obj: Any, **kwargs: Any) -> None:
        self.events.append(kwargs)


def context(clock: FakeClock, notifier: Notifier, annotations: dict[str, str], *,
            interval: str = "24h") -> ReconcileContext:
    obj = doc(lastAppliedRevision=APPLIED, conditions=[{
        "type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
        "message": f"Applied revision: {APPLIED}", "lastTransitionTime": "2026-03-01T00:00:00Z",
        "observedGeneration": 2}])
    obj["metadata"]["annotations"] = annotations
    obj["spec"]["interval"] = interval
    ctx = ReconcileContext(ks=parse_kustomization(obj), obj=obj, clock=clock, notifier=notifier,  # type: ignore[arg-type]
                           patcher=StatusPatcher(client=FakeClient(), obj=obj, clock=clock),  # type: ignore[arg-type]
                           started=clock.monotonic(), revision=PENDING)
    remember_ready(ctx)
    ctx.mark_unknown(READY, "Progressing", "Reconciliation in progress")
    ctx.mark_reconciling("Detecting drift")
    return ctx


def planner(*actions: str, errors: tuple[str, ...] = ()) -> Any:
    calls: list[int] = []

    async def plan() -> tuple[list[PreviewChange], list[str]]:
        calls.append(1)
        return [PreviewChange(ref=ObjRef(group="", kind="ConfigMap", namespace="apps", name=f"c{i}"),
                              api_version="v1", action=a, desired="d") for i, a in enumerate(actions)], list(errors)

    plan.calls = calls  # type: ignore[attr-defined]
    return plan


def windows(*items: dict[str, Any]) -> dict[str, str]:
    return {SYNC_WINDOWS_ANNOTATION: json.dumps(list(items))}


# from Saturday 22:00 CET for 9 hours elapsed: until Sunday 08:00 CEST (10 wall-clock hours)
NIGHT = {"kind": "deny", "schedule": "0 22 * * 6", "duration": "9h", "timeZone": "Europe/Berlin"}


async def test_a_closed_window_holds_and_looks_again_at_its_opening_across_dst() -> None:
    # a day's interval: the timer at the opening is what brings the change
    clock, notifier = FakeClock(start=BEFORE_DST), Notifier()
    ctx = context(clock, notifier, windows(NIGHT))
    gate = ChangeGate(client=None, clock=clock, options=GateOptions())  # type: ignore[arg-type]
    with pytest.raises(GateHeld) as held:
        await gate.check(ctx, plan=planner("configured"))
    # opened at Saturday 22:00 CET (21:00 UTC) + 9h elapsed = 06:00 UTC = 08:00 CEST
    assert held.value.requeue_after == 7 * 3600
    assert "changes are allowed from 2026-03-29T06:00:00Z" in held.value.args[0]
    ready = conditions.get(ctx.conditions, READY)
    assert ready is not None and (ready.status, ready.message) == ("True", f"Applied revision: {APPLIED}")
    assert conditions.get(ctx.conditions, RECONCILING) is None
    assert ctx.extra[PENDING_KEY] == "SyncWindowClosed"
    assert [e["ready_reason"] for e in notifier.events] == ["SyncWindowClosed"]

    # the same plan an hour later (the window still closed): no second event
    await clock.advance(3600)
    ctx2 = context(clock, notifier, windows(NIGHT))
    ctx2.ks.status.conditions = list(ctx.conditions)
    remember_ready(ctx2)
    with pytest.raises(GateHeld) as again:
        await gate.check(ctx2, plan=planner("configured"))
    assert again.value.requeue_after == 6 * 3600
    assert len(notifier.events) == 1

    # at the opening: applied, SyncAllowed=True
    await clock.advance(6 * 3600)
    ctx3 = context(clock, notifier, windows(NIGHT))
    plan = planner("configured")
    await gate.check(ctx3, plan=plan)
    assert plan.calls == []  # open window, no approval: nothing to plan
    allowed = conditions.get(ctx3.conditions, "SyncAllowed")
    assert allowed is not None and (allowed.status, allowed.reason) == ("True", "SyncWindowOpen")


async def test_approval_holds_until_the_plan_id_is_approved() -> None:
    clock, notifier = FakeClock(start=BEFORE_DST), Notifier()
    gate = ChangeGate(client=None, clock=clock, options=GateOptions())  # type: ignore[arg-type]
    ctx = context(clock, notifier, {APPROVAL_ANNOTATION: "manual"})
    with pytest.raises(GateHeld) as held:
        await gate.check(ctx, plan=planner("created", "deleted"))
    assert held.value.requeue_after == 24 * 3600  # the interval: the approval annotation enqueues by itself
    approved = conditions.get(ctx.conditions, "Approved")
    assert approved is not None and approved.reason == "ApprovalRequired"
    assert "(1 created, 1 deleted)" in approved.message
    plan_id = plan_id_in(approved.message)

    ok = context(clock, notifier, {APPROVAL_ANNOTATION: "manual", APPROVED_PLAN_ANNOTATION: plan_id})
    ok.ks.status.conditions = list(ctx.conditions)
    await gate.check(ok, plan=planner("created", "deleted"))
    approved = conditions.get(ok.conditions, "Approved")
    assert approved is not None and approved.reason == "PlanApproved" and ok.extra[PENDING_KEY] is None
    # the approval is taken up: its record is written (conditions only) before the gate returns to apply
    record = record_in(approved.message)
    assert record is not None and (record.plan, record.state) == (plan_id, "applying")
    (call,) = ok.patcher._client.calls  # type: ignore[attr-defined]
    assert list(call["body"]["status"]) == ["conditions"] and call["subresource"] == "status"
    written = next(c for c in call["body"]["status"]["conditions"] if c["type"] == "Approved")
    assert written["message"] == approved.message

    # applied: used up; the next reconcile of the same plan (drift towards the same state) waits
    approval_used(ok)
    approved = conditions.get(ok.conditions, "Approved")
    assert approved is not None and approved.message.startswith(f"Plan {plan_id} approved for revision {PENDING} "
                                                                "and applied [approval key=")
    assert approved.message.endswith(f"plan={plan_id} used]")
    again = context(clock, notifier, {APPROVAL_ANNOTATION: "manual", APPROVED_PLAN_ANNOTATION: plan_id})
    again.ks.status.conditions = list(ok.conditions)
    with pytest.raises(GateHeld, match=f"the approval of plan {plan_id} was already used"):
        await gate.check(again, plan=planner("created", "deleted"))


async def test_an_approval_whose_record_cannot_be_written_applies_nothing() -> None:
    clock, notifier = FakeClock(), Notifier()
    gate = ChangeGate(client=None, clock=clock, options=GateOptions())  # type: ignore[arg-type]
    ctx = context(clock, notifier, {APPROVAL_ANNOTATION: "manual"})
    with pytest.raises(GateHeld):
        await gate.check(ctx, plan=planner("configured"))
    ok = context(clock, notifier, {APPROVAL_ANNOTATION: "manual",
                                   APPROVED_PLAN_ANNOTATION: plan_id_in(str(ctx.conditions[-1].message))})
    ok.ks.status.conditions = list(ctx.conditions)
    ok.patcher._client.failures.append(InternalServerError("etcdserver: request timed out", status=500))  # type: ignore[attr-defined]
    with pytest.raises(GateRecordError, match=r"failed to record the approval: .*request timed out"):
        await gate.check(ok, plan=planner("configured"))


async def test_no_gate_plans_nothing_and_removes_its_conditions() -> None:
    clock, notifier = FakeClock(), Notifier()
    ctx = context(clock, notifier, {})
    ctx.mark_false("Approved", "ApprovalRequired", "old")
    plan = planner("configured")
    await ChangeGate(client=None, clock=clock, options=GateOptions()).check(ctx, plan=plan)  # type: ignore[arg-type]
    assert plan.calls == [] and conditions.get(ctx.conditions, "Approved") is None


async def test_a_plan_that_cannot_be_computed_is_an_error() -> None:
    clock, notifier = FakeClock(), Notifier()
    ctx = context(clock, notifier, {APPROVAL_ANNOTATION: "manual"})
    with pytest.raises(GatePlanError, match="dry-run failed"):
        await ChangeGate(client=None, clock=clock, options=GateOptions()).check(  # type: ignore[arg-type]
            ctx, plan=planner("unknown", errors=("ConfigMap/apps/c0 dry-run failed: nope",)))


async def test_the_interval_still_applies_when_sooner_than_the_opening() -> None:
    clock, notifier = FakeClock(start=BEFORE_DST), Notifier()
    ctx = context(clock, notifier, windows(NIGHT), interval="5m")
    with pytest.raises(GateHeld) as held:
        await ChangeGate(client=None, clock=clock, options=GateOptions()).check(  # type: ignore[arg-type]
            ctx, plan=planner("configured"))
    assert held.value.requeue_after == 300
