"""The gate decision, as a table: approval, windows, manual requests, invalid windows."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kustomize_controller.api.changes import ApprovalMode
from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.apply.preview import PreviewChange
from kustomize_controller.reconcile.gate.approval import approval_key
from kustomize_controller.reconcile.gate.decision import GateInput, decide
from kustomize_controller.reconcile.gate.plan import Plan, plan_of
from kustomize_controller.reconcile.gate.windows import WindowState, parse_window

AUTO, MANUAL = ApprovalMode.AUTO, ApprovalMode.MANUAL
OPENS = datetime(2026, 6, 2, 8, tzinfo=UTC)
DENY = parse_window({"kind": "deny", "schedule": "0 22 * * *", "duration": "10h"}, source="cm[0]")
OPEN = WindowState(allowed=True, manual_allowed=True)
CLOSED = WindowState(allowed=False, manual_allowed=False, blocking=(DENY,), opens_at=OPENS)
CLOSED_MANUAL = WindowState(allowed=False, manual_allowed=True, blocking=(DENY,), opens_at=OPENS)


def plan(*actions: str) -> Plan:
    return plan_of("main@sha1:abc", [
        PreviewChange(ref=ObjRef(group="", kind="ConfigMap", namespace="a", name=f"o{i}"), api_version="v1",
                      action=action, desired="d")
        for i, action in enumerate(actions)
    ])


CHANGED = plan("configured")
EMPTY = plan("unchanged")


@pytest.mark.parametrize(
    ("approval", "approved", "the_plan", "windows", "manual", "apply", "held_by"),
    [
        # approval
        (MANUAL, "", CHANGED, None, False, False, "ApprovalRequired"),
        (MANUAL, CHANGED.id, CHANGED, None, False, True, ""),
        (MANUAL, "0123456789ab", CHANGED, None, False, False, "ApprovalRequired"),  # outdated
        (MANUAL, "", CHANGED, None, True, False, "ApprovalRequired"),  # requestedAt approves nothing
        (MANUAL, "", EMPTY, None, False, True, ""),
        (AUTO, "", CHANGED, None, False, True, ""),
        # windows
        (AUTO, "", CHANGED, OPEN, False, True, ""),
        (AUTO, "", CHANGED, CLOSED, False, False, "SyncWindowClosed"),
        (AUTO, "", CHANGED, CLOSED, True, False, "SyncWindowClosed"),  # manualSync false
        (AUTO, "", CHANGED, CLOSED_MANUAL, False, False, "SyncWindowClosed"),
        (AUTO, "", CHANGED, CLOSED_MANUAL, True, True, ""),
        (AUTO, "", EMPTY, CLOSED, False, True, ""),  # nothing to write: nothing held
        # both
        (MANUAL, CHANGED.id, CHANGED, CLOSED, False, False, "SyncWindowClosed"),  # approved, waits for the window
        (MANUAL, CHANGED.id, CHANGED, CLOSED_MANUAL, False, True, ""),  # the approval is the manual request
        (MANUAL, "", CHANGED, CLOSED_MANUAL, True, False, "ApprovalRequired"),
    ],
)
def test_decide(approval: ApprovalMode, approved: str, the_plan: Plan, windows: WindowState | None, manual: bool,
                apply: bool, held_by: str) -> None:
    decision = decide(GateInput(approval=approval, approved=approved, plan=the_plan, windows=windows,
                                manual_request=manual, subject="web -n apps",
                                approval_key=approval_key(approved, "t1")))
    assert decision.apply is apply
    assert decision.held_by == held_by
    assert (decision.approved is not None) is (approval is MANUAL)
    assert (decision.sync_allowed is not None) is (windows is not None)


def test_messages() -> None:
    held = decide(GateInput(approval=MANUAL, approved="0123456789ab", plan=CHANGED, windows=None,
                            subject="web -n apps"))
    assert held.approved is not None and held.approved.reason == "ApprovalRequired"
    assert held.approved.message.startswith(
        f"Approval required for revision main@sha1:abc: plan {CHANGED.id} (1 configured); "
        "the approved plan 0123456789ab is outdated")
    assert "kustomize-controller approve web -n apps" in held.approved.message
    assert f"kustomize.toolkit.fluxcd.io/approved-plan: {CHANGED.id}" in held.approved.message

    closed = decide(GateInput(approval=AUTO, approved="", plan=CHANGED, windows=CLOSED))
    assert closed.sync_allowed is not None and not closed.sync_allowed.status
    assert closed.sync_allowed.message == (
        "Sync window closed (active: deny window '0 22 * * *' for 10h0m0s (UTC) from cm[0]); "
        "changes are allowed from 2026-06-02T08:00:00Z; manual requests are not allowed; "
        f"plan {CHANGED.id} (1 configured) for revision main@sha1:abc waits")
    assert closed.opens_at == OPENS

    empty = decide(GateInput(approval=MANUAL, approved="", plan=EMPTY, windows=OPEN))
    assert empty.approved is not None and (empty.approved.status, empty.approved.reason) == (True, "NoChanges")
    assert empty.sync_allowed is not None and (empty.sync_allowed.status, empty.sync_allowed.reason) == (
        True, "SyncWindowOpen")


def test_invalid_windows_hold_every_change_even_a_manual_request() -> None:
    for approval, approved in ((AUTO, ""), (MANUAL, CHANGED.id)):
        decision = decide(GateInput(approval=approval, approved=approved, plan=CHANGED, windows=None,
                                    windows_error="sync window x[0]: unknown time zone 'Mars'", manual_request=True,
                                    approval_key=approval_key(approved, "")))
        assert not decision.apply and decision.held_by == "InvalidSyncWindow"
        assert decision.sync_allowed is not None and "unknown time zone 'Mars'" in decision.sync_allowed.message
        if approval is MANUAL:  # the approval stands; the windows hold it
            assert decision.approved is not None and decision.approved.reason == "PlanApproved"
    nothing = decide(GateInput(approval=AUTO, approved="", plan=EMPTY, windows=None, windows_error="bad"))
    assert nothing.apply and nothing.sync_allowed is not None and nothing.sync_allowed.reason == "InvalidSyncWindow"
