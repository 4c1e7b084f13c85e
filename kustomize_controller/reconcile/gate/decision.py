"""The gate decision: may this reconcile write its plan, and what do the conditions say (pure).

Inputs: the approval mode, the approved plan id and the key of the approval (annotations,
``approval.py``), the record of the last approval taken up (the end of the ``Approved`` message in the
status, and whether there was such a condition at all), the plan of this reconcile, what the sync windows
say now (``windows.evaluate``, or an invalid-windows error) and whether this reconcile is a manual request
(``reconcile.fluxcd.io/requestedAt`` not handled yet).

The approval is *usable* when it names exactly this plan and was not used: the record is of another key,
or of this key ``applying`` with this plan's id and live fingerprint (a controller died after recording it,
before writing any of the plan). A record ``applying`` that does not match so counts as ``used``. With no
``Approved`` condition in the status (``approval: manual`` just switched on, or back on) an approval already
in the annotations counts as used: it may be one that was applied before; so does one found when the plan is
empty (what it approved is in place, whoever put it there). Rules, in order:

1. Invalid windows hold every change (fail closed: a mistyped freeze must not let changes through);
   ``SyncAllowed=False``/``InvalidSyncWindow`` with the error.
2. An empty plan writes nothing, so nothing is held: ``Approved=True``/``NoChanges``.
3. ``approval: manual`` and no usable approval of this plan: held, ``Approved=False``/``ApprovalRequired``
   naming the revision, the plan id and its counts (and the outdated or used-up approval, with how to
   approve again).
4. Windows closed: held, ``SyncAllowed=False``/``SyncWindowClosed`` naming the blocking window(s) and
   when changes are allowed again — unless this is a manual request (requestedAt, or a usable approval of
   exactly this plan) and the windows allow manual syncs (``manualSync``).
5. Otherwise the plan is applied; with a usable approval the record becomes ``applying`` (the gate
   writes it before the first write; ``Decision.takes_approval``).

``SyncAllowed`` is reported whenever windows apply to the Kustomization (``True``/``SyncWindowOpen``
while open), ``Approved`` whenever ``approval: manual``; ``None`` here means "remove the condition".
Every ``Approved`` message ends with the record (``Decision.record``), so that it is never forgotten while
``approval: manual`` holds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from kustomize_controller.api.changes import (
    APPROVAL_REQUIRED_REASON,
    APPROVED_AT_ANNOTATION,
    APPROVED_PLAN_ANNOTATION,
    INVALID_SYNC_WINDOW_REASON,
    NO_CHANGES_REASON,
    PLAN_APPROVED_REASON,
    SYNC_WINDOW_CLOSED_REASON,
    SYNC_WINDOW_OPEN_REASON,
    ApprovalMode,
)
from kustomize_controller.reconcile.gate.approval import APPLYING, USED, ApprovalRecord, is_plan_id, with_record
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
    approval_key: str = ""  # the key of the approval in the annotations (approval.approval_key; "" when none)
    record: ApprovalRecord | None = None  # the record the Approved condition of the status ends with
    recorded: bool = True  # the status has an Approved condition (False: approval: manual just switched on)


@dataclass(frozen=True)
class Decision:
    apply: bool
    held_by: str = ""  # the reason of the hold: ApprovalRequired, SyncWindowClosed, InvalidSyncWindow
    approved: Verdict | None = None
    sync_allowed: Verdict | None = None
    opens_at: datetime | None = None  # held by a window: when to look again
    record: ApprovalRecord | None = None  # the record the Approved message ends with

    @property
    def takes_approval(self) -> bool:
        """The plan is applied with an approval: its ``applying`` record goes to the status first."""
        return self.apply and self.record is not None and self.record.state == APPLYING


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
    decision = _decide(gate)
    if gate.approval is not ApprovalMode.MANUAL or decision.approved is None:
        return decision
    record = _carried(gate)
    if decision.apply and usable(gate):
        record = ApprovalRecord(key=gate.approval_key, plan=gate.plan.id, state=APPLYING, live=gate.plan.live)
    verdict = decision.approved
    return replace(decision, record=record,
                   approved=replace(verdict, message=with_record(verdict.message, record)))


def usable(gate: GateInput) -> bool:
    """Whether the approval in the annotations may be used for this plan (module contract)."""
    plan = gate.plan
    if not gate.approval_key or gate.approved != plan.id or plan.empty or not gate.recorded:
        return False
    record = gate.record
    if record is None or record.key != gate.approval_key:
        return True
    return record.state == APPLYING and record.plan == plan.id and record.live == plan.live


def _carried(gate: GateInput) -> ApprovalRecord | None:
    """The record as this reconcile found it: an ``applying`` one that cannot go on is ``used``; an
    approval found when approval: manual was just switched on, or with nothing left to change (what it
    approved is in place), is ``used``."""
    record = gate.record
    fresh = record is None or record.key != gate.approval_key
    if gate.approval_key and is_plan_id(gate.approved) and (not gate.recorded or (gate.plan.empty and fresh)):
        return ApprovalRecord(key=gate.approval_key, plan=gate.approved, state=USED)
    if record is not None and record.state == APPLYING and not (
        record.key == gate.approval_key and usable(gate)
    ):
        return record.used()
    return record


def _decide(gate: GateInput) -> Decision:
    plan, manual_mode = gate.plan, gate.approval is ApprovalMode.MANUAL
    approved_now = manual_mode and usable(gate)
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
            approval = _approved(plan) if approved_now else _pending(gate)
        return Decision(apply=False, held_by=INVALID_SYNC_WINDOW_REASON, sync_allowed=invalid, approved=approval)
    windows = gate.windows
    if plan.empty:
        return Decision(apply=True, approved=_no_changes(plan) if manual_mode else None,
                        sync_allowed=window_verdict(windows) if windows is not None else None)
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
    hint = f"kustomize-controller approve {gate.subject}" if gate.subject else "kustomize-controller approve"
    if gate.approved == plan.id:  # not usable: used up
        return Verdict(False, APPROVAL_REQUIRED_REASON,
                       f"{message}; the approval of plan {plan.id} was already used (an approval applies once); "
                       f"approve again with `{hint}`, or set the annotation {APPROVED_AT_ANNOTATION} to a new "
                       f"value (the current time) with {APPROVED_PLAN_ANNOTATION}: {plan.id}")
    record = _carried(gate)
    if is_plan_id(gate.approved) and record is not None and record.key == gate.approval_key:
        # used by its apply (all of it, or part of it when the controller stopped in the middle)
        message += f"; the approval of plan {gate.approved} was used, this plan waits for its own approval"
    elif is_plan_id(gate.approved):
        message += (f"; the approved plan {gate.approved} is outdated (a newer revision or new drift), "
                    f"this plan waits for its own approval")
    elif gate.approved:
        message += f"; the annotation {APPROVED_PLAN_ANNOTATION} holds no plan id"
    return Verdict(False, APPROVAL_REQUIRED_REASON,
                   f"{message}; approve with `{hint}` or the annotations {APPROVED_PLAN_ANNOTATION}: {plan.id} "
                   f"and {APPROVED_AT_ANNOTATION}: <a new value, the current time>")
