"""An approval applies once: its key, its record in the ``Approved`` message, and the decision that uses it up
(a table: the record the status holds × the approval in the annotations × the plan computed now)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kustomize_controller.api.changes import ApprovalMode
from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.apply.preview import PreviewChange
from kustomize_controller.reconcile.gate.approval import (
    ApprovalRecord,
    approval_key,
    is_plan_id,
    record_in,
    with_record,
)
from kustomize_controller.reconcile.gate.decision import GateInput, decide, usable
from kustomize_controller.reconcile.gate.plan import Plan, plan_of
from kustomize_controller.reconcile.gate.windows import WindowState, parse_window

MANUAL = ApprovalMode.MANUAL
DENY = parse_window({"kind": "deny", "schedule": "0 22 * * *", "duration": "10h"}, source="cm[0]")
CLOSED_MANUAL = WindowState(allowed=False, manual_allowed=True, blocking=(DENY,), opens_at=None)


def plan(live_version: str = "7", *, revision: str = "main@sha1:abc", action: str = "configured") -> Plan:
    return plan_of(revision, [PreviewChange(ref=ObjRef(group="", kind="ConfigMap", namespace="a", name="x"),
                                            api_version="v1", action=action, desired="d", paths=("data.k",),
                                            live_version=live_version)])


PLAN = plan()
KEY = approval_key(PLAN.id, "2026-06-01T10:00:00.5Z")
OTHER_KEY = approval_key(PLAN.id, "2026-06-02T10:00:00Z")
APPLYING = ApprovalRecord(key=KEY, plan=PLAN.id, state="applying", live=PLAN.live)
USED = ApprovalRecord(key=KEY, plan=PLAN.id, state="used")


def test_the_key_is_bounded_and_hides_the_token() -> None:
    token = "x" * 10_000 + " [approval key=0000000000000000 plan=000000000000 used]"
    key = approval_key(PLAN.id, token)
    assert len(key) == 16 and key != approval_key(PLAN.id, "") and key != approval_key("0" * 12, token)
    assert approval_key("", "2026") == ""
    assert is_plan_id(PLAN.id) and not is_plan_id("zz") and not is_plan_id(PLAN.id + "0")


def test_a_record_is_read_back_only_from_the_end_of_a_message() -> None:
    for record in (APPLYING, USED):
        message = with_record(f"Plan {PLAN.id} approved for revision main@sha1:abc", record)
        assert record_in(message) == record
        assert with_record(message, None) == f"Plan {PLAN.id} approved for revision main@sha1:abc"
        assert record_in(with_record(message, USED)) == USED  # replaced, not appended twice
    quoted = f"No changes to approve: revision {USED.text()}-x is applied"
    assert record_in(quoted) is None  # a revision (from the source) quoting a record is not one
    assert record_in("") is None and record_in(None) is None
    assert record_in(f"m [approval key={KEY} plan={PLAN.id} applying]") == USED  # no fingerprint: cannot go on


def test_the_live_fingerprint_follows_resource_versions_not_the_id() -> None:
    assert plan("8").id == PLAN.id and plan("8").live != PLAN.live
    assert plan("").live != PLAN.live  # absent (to create) is a state of its own
    assert len(PLAN.live) == 16


@pytest.mark.parametrize(
    ("record", "key", "the_plan", "recorded", "apply", "out"),
    [
        # a new approval of this plan: taken up, "applying" with the plan's live fingerprint
        (None, KEY, PLAN, True, True, APPLYING),
        (ApprovalRecord(key=OTHER_KEY, plan=PLAN.id, state="used"), KEY, PLAN, True, True, APPLYING),
        # used up: the same plan id again (drift towards the same state, a revert) waits; the record stays
        (USED, KEY, PLAN, True, False, USED),
        (USED, KEY, plan("9"), True, False, USED),
        # re-approved (a new approved-at): a new key, applied
        (USED, OTHER_KEY, PLAN, True, True, replace(APPLYING, key=OTHER_KEY)),
        # a controller died after recording "applying": nothing written (same id, same live) goes on...
        (APPLYING, KEY, PLAN, True, True, APPLYING),
        # ...something written (the live fingerprint moved): used, the rest waits
        (APPLYING, KEY, plan("8"), True, False, USED),
        # ...all written: the plan is empty now, the record says used
        (APPLYING, KEY, plan(action="unchanged"), True, True, USED),
        # ...a newer plan (another id) waits for its own approval; the record says used
        (APPLYING, KEY, plan(revision="main@sha1:def"), True, False, USED),
        # approval: manual just switched (back) on: an approval already there counts as used
        (None, KEY, PLAN, False, False, USED),
        # nothing to change: what the approval allowed is in place (applied by someone, or before an upgrade)
        (None, KEY, plan(action="unchanged"), True, True, USED),
        (ApprovalRecord(key=OTHER_KEY, plan=PLAN.id, state="used"), KEY, plan(action="unchanged"), True, True, USED),
        (None, "", PLAN, False, False, None),
    ],
)
def test_an_approval_is_used_once(record: ApprovalRecord | None, key: str, the_plan: Plan, recorded: bool,
                                  apply: bool, out: ApprovalRecord | None) -> None:
    gate = GateInput(approval=MANUAL, approved=PLAN.id if key else "", plan=the_plan, windows=None,
                     subject="web -n apps", approval_key=key, record=record, recorded=recorded)
    decision = decide(gate)
    assert decision.apply is apply
    assert decision.record == out
    assert decision.approved is not None and record_in(decision.approved.message) == out
    assert decision.takes_approval is (apply and usable(gate))


def test_a_used_approval_says_how_to_approve_again() -> None:
    held = decide(GateInput(approval=MANUAL, approved=PLAN.id, plan=PLAN, windows=None, subject="web -n apps",
                            approval_key=KEY, record=USED))
    assert held.approved is not None and held.approved.reason == "ApprovalRequired"
    message = held.approved.message
    assert message.startswith(f"Approval required for revision main@sha1:abc: plan {PLAN.id} (1 configured); "
                              f"the approval of plan {PLAN.id} was already used (an approval applies once); "
                              "approve again with `kustomize-controller approve web -n apps`, or set the "
                              "annotation kustomize.toolkit.fluxcd.io/approved-at to a new value")
    assert message.endswith(USED.text())
    assert "2026-06-01" not in message  # the token itself is never shown


def test_an_annotation_that_is_no_plan_id_is_not_echoed() -> None:
    held = decide(GateInput(approval=MANUAL, approved="x" * 500, plan=PLAN, windows=None,
                            approval_key=approval_key("x" * 500, "")))
    assert held.approved is not None and "x" * 20 not in held.approved.message
    assert "the annotation kustomize.toolkit.fluxcd.io/approved-plan holds no plan id" in held.approved.message


def test_the_record_is_carried_by_every_approved_message() -> None:
    empty = decide(GateInput(approval=MANUAL, approved=PLAN.id, plan=plan(action="unchanged"), windows=None,
                             approval_key=KEY, record=USED))
    assert empty.approved is not None and empty.approved.reason == "NoChanges"
    assert record_in(empty.approved.message) == USED
    newer = plan(revision="main@sha1:def")
    pending = decide(GateInput(approval=MANUAL, approved=PLAN.id, plan=newer, windows=None,
                               approval_key=KEY, record=USED))
    assert pending.approved is not None and "was used, this plan waits" in pending.approved.message
    assert record_in(pending.approved.message) == USED


def test_an_approval_is_the_manual_request_of_a_window_once() -> None:
    """manualSync: a usable approval of exactly this plan passes a closed window; used up, it does not."""
    passed = decide(GateInput(approval=MANUAL, approved=PLAN.id, plan=PLAN, windows=CLOSED_MANUAL,
                              approval_key=KEY))
    assert passed.apply and passed.takes_approval
    held = decide(GateInput(approval=MANUAL, approved=PLAN.id, plan=PLAN, windows=CLOSED_MANUAL,
                            approval_key=KEY, record=USED))
    assert not held.apply and held.held_by == "ApprovalRequired"


def test_a_plan_after_a_used_approval_says_it_was_used() -> None:
    """The rest of a plan partly applied before a crash (or the next revision) names the approval as used,
    not as outdated."""
    for record in (USED, APPLYING):
        rest = decide(GateInput(approval=MANUAL, approved=PLAN.id, plan=plan(revision="main@sha1:def"),
                                windows=None, approval_key=KEY, record=record))
        assert rest.approved is not None and not rest.apply
        message = rest.approved.message
        assert f"the approval of plan {PLAN.id} was used, this plan waits for its own approval" in message
