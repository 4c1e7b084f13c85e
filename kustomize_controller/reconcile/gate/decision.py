"""The gate decision: may this reconcile write its plan, and what do the conditions say (pure).

Inputs: the approval mode and the approved plan id (annotations), the plan of this reconcile, what the
sync windows say now (``windows.evaluate``, or an invalid-windows error) and whether this reconcile is a
manual request (``reconcile.fluxcd.io/requestedAt`` not handled yet). Rules, in order:

1. Invalid windows hold every change (fail closed: a mistyped freeze must not let changes through);
   ``SyncAllowed=False``/``InvalidSyncWindow`` with the error.
2. An empty plan writes nothing, so nothing is held: ``Approved=True``/``NoChanges``.
3. ``approval: manual`` and the approved id is not this plan's: held, ``Approved=False``/
   ``ApprovalRequired`` naming the revision, the plan id and its counts (and the outdated approval).
4. Windows closed: held, ``SyncAllowed=False``/``SyncWindowClosed`` naming the blocking window(s) and
   when changes are allowed again — unless this is a manual request (requestedAt, or an approval of
   exactly this plan) and the windows allow manual syncs (``manualSync``).
5. Otherwise the plan is applied.

``SyncAllowed`` is reported whenever windows apply to the Kustomization (``True``/``SyncWindowOpen``
while open), ``Approved`` whenever ``approval: manual``; ``None`` here means "remove the condition".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from kustomize_controller.api.changes import (
    APPROVAL_REQUIRED_REASON,
    APPROVED_PLAN_ANNOTATION,
    INVALID_SYNC_WINDOW_REASON,
    NO_CHANGES_REASON,
    PLAN_APPROVED_REASON,
    SYNC_WINDOW_CLOSED_REASON,
    SYNC_WINDOW_OPEN_REASON,
    ApprovalMode,
)
from kustomize_controller.reconcile.gate.plan import Plan
from kustomize_controller.reconcile.gate.windows import WindowState


@dataclass(frozen=True)
class Verdict:
    """A condition to set: ``status`` ``True``/``False``, reason, message."""

    status: bool
    reason: str
    message: str


@dataclass(frozen=True)
class GateInput:
    approval: ApprovalMode
    approved: str  # the approved plan id ("" when none)
    plan: Plan
    windows: WindowState | None  # None: no window applies
    windows_error: str = ""  # invalid windows: the error (rule 1)
    manual_request: bool = False
    subject: str = ""  # NAME -n NAMESPACE, for the hint how to approve


@dataclass(frozen=True)
class Decision:
    apply: bool
    held_by: str = ""  # the reason of the hold: ApprovalRequired, SyncWindowClosed, InvalidSyncWindow
    approved: Verdict | None = None
    sync_allowed: Verdict | None = None
    opens_at: datetime | None = None  # held by a window: when to look again


def _format_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def window_verdict(state: WindowState, *, manual_passed: bool = False, waiting: Plan | None = None) -> Verdict:
    if state.allowed:
        active = ", ".join(w.describe() for w in state.active)
        return Verdict(True, SYNC_WINDOW_OPEN_REASON, f"Sync allowed: {active}" if active else "Sync allowed")
    kind = "active" if state.blocking and state.blocking[0].kind == "deny" else "not active"
    blocking = "; ".join(w.describe() for w in state.blocking)
    opens = (f"changes are allowed from {_format_time(state.opens_at)}" if state.opens_at is not None
             else "changes are not allowed within a year")
    manual = ("a manual request was let through (manualSync)" if manual_passed else
              "manual requests are allowed (manualSync)" if state.manual_allowed else
              "manual requests are not allowed")
    message = f"Sync window closed ({kind}: {blocking}); {opens}; {manual}"
    if waiting is not None:
        message += f"; {waiting.describe()} for revision {waiting.revision} waits"
    return Verdict(False, SYNC_WINDOW_CLOSED_REASON, message)


def decide(gate: GateInput) -> Decision:
    """The decision for one reconcile (module contract)."""
    plan, manual_mode = gate.plan, gate.approval is ApprovalMode.MANUAL
    if gate.windows_error:
        invalid = Verdict(False, INVALID_SYNC_WINDOW_REASON,
                          f"Invalid sync windows, nothing is applied until they are fixed: {gate.windows_error}")
        if plan.empty:
            return Decision(apply=True, sync_allowed=invalid,
                            approved=_no_changes(plan) if manual_mode else None)
        invalid = Verdict(False, INVALID_SYNC_WINDOW_REASON,
                          f"{invalid.message}; {plan.describe()} for revision {plan.revision} waits")
        approval = None
        if manual_mode:
            approval = _approved(plan) if gate.approved == plan.id else _pending(gate)
        return Decision(apply=False, held_by=INVALID_SYNC_WINDOW_REASON, sync_allowed=invalid, approved=approval)
    windows = gate.windows
    if plan.empty:
        return Decision(apply=True, approved=_no_changes(plan) if manual_mode else None,
                        sync_allowed=window_verdict(windows) if windows is not None else None)
    approved_now = manual_mode and gate.approved == plan.id
    if manual_mode and not approved_now:
        return Decision(apply=False, held_by=APPROVAL_REQUIRED_REASON, approved=_pending(gate),
                        sync_allowed=window_verdict(windows) if windows is not None else None,
                        opens_at=windows.opens_at if windows is not None and not windows.allowed else None)
    approved = _approved(plan) if approved_now else None
    if windows is None or windows.allowed:
        return Decision(apply=True, approved=approved,
                        sync_allowed=window_verdict(windows) if windows is not None else None)
    manual = gate.manual_request or approved_now
    if manual and windows.manual_allowed:
        return Decision(apply=True, approved=approved, sync_allowed=window_verdict(windows, manual_passed=True))
    return Decision(apply=False, held_by=SYNC_WINDOW_CLOSED_REASON, approved=approved,
                    sync_allowed=window_verdict(windows, waiting=plan), opens_at=windows.opens_at)


def _approved(plan: Plan) -> Verdict:
    return Verdict(True, PLAN_APPROVED_REASON, f"Plan {plan.id} approved for revision {plan.revision}")


def _no_changes(plan: Plan) -> Verdict:
    return Verdict(True, NO_CHANGES_REASON, f"No changes to approve: revision {plan.revision} is applied")


def _pending(gate: GateInput) -> Verdict:
    plan = gate.plan
    message = f"Approval required for revision {plan.revision}: {plan.describe()}"
    if gate.approved:
        message += (f"; the approved plan {gate.approved} is outdated (a newer revision or new drift), "
                    f"this plan waits for its own approval")
    hint = f"kustomize-controller approve {gate.subject}" if gate.subject else "kustomize-controller approve"
    return Verdict(False, APPROVAL_REQUIRED_REASON,
                   f"{message}; approve with `{hint}` or the annotation {APPROVED_PLAN_ANNOTATION}: {plan.id}")
