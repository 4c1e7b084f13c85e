"""The change gate in a reconcile: approval and sync windows, between the dry-run plan and the first write.

``ApplyStep`` calls ``ChangeGate.check(ctx, plan=...)`` after the build, before the apply engine
writes anything (``plan`` runs the one planner, ``reconcile/preview.plan_changes``, with the apply's
own options). The gate is off — nothing planned, nothing extra read, the ``Approved``/``SyncAllowed``
conditions removed — unless the Kustomization has ``approval: manual`` or sync windows apply to it
(its annotation, or the fleet ConfigMap). With windows open and no approval required nothing is
planned either.

When the decision (``decision.py``) holds the plan, ``check`` raises ``GateHeld`` after it has:
- set ``Approved``/``SyncAllowed`` as decided and put ``Ready`` back as it was before this reconcile
  (it describes what is applied; with nothing ever applied it becomes ``False`` with the hold's
  reason and message), removed ``Reconciling`` (the reconcile is over: it waits for a person or a time);
- emitted one event per new plan (``ApprovalRequired``, ``SyncWindowClosed``, Normal; ``InvalidSyncWindow``,
  Warning): the plan id is in the condition message, persisted in the status, so repeats across
  intervals and restarts are silent;
- recorded the hold for the ``gotk_plan_pending`` gauge (``ctx.extra[PENDING_KEY]``).
``GateHeld.requeue_after`` is when to look again: the opening of the window (a timer on the workqueue,
at most the interval away), the interval for an approval (the approval annotation enqueues at once),
the retry interval for invalid windows. ``lastAttemptedRevision`` is the pending revision (set by the
apply step before the build). A plan whose dry-run fails raises ``GatePlanError`` (the apply step
reports it as the apply would: nothing is written).

An approval is used once (``approval.py``): when the decision applies a plan with an approval, ``check``
writes the status' conditions (``Approved`` ending with the ``applying`` record) before it returns, so
before the first write of the plan; a failure of that write raises ``GateRecordError`` (nothing applied).
Once the apply wrote something the apply step calls ``approval_used`` and the final status write records
the approval as ``used``. Writes are ordered so that a crash anywhere neither applies the plan twice nor
loses the record: the record is written first, and a reconcile that finds it ``applying`` compares the plan
and the live objects with it (``decision.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

import structlog

from kustomize_controller.api.changes import (
    APPROVAL_REQUIRED_REASON,
    APPROVED_CONDITION,
    INVALID_SYNC_WINDOW_REASON,
    SYNC_ALLOWED_CONDITION,
    SYNC_WINDOWS_ANNOTATION,
    ApprovalMode,
    approval_mode,
    approved_at,
    approved_plan,
)
from kustomize_controller.api.meta import RECONCILE_REQUEST_ANNOTATION, Condition
from kustomize_controller.apply.preview import PreviewChange
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import KubeError
from kustomize_controller.reconcile import conditions
from kustomize_controller.reconcile.context import READY, RECONCILING, ReconcileContext
from kustomize_controller.reconcile.gate.approval import APPLYING, approval_key, record_in, with_record
from kustomize_controller.reconcile.gate.decision import Decision, GateInput, Verdict, decide, window_verdict
from kustomize_controller.reconcile.gate.fleet import FleetWindows
from kustomize_controller.reconcile.gate.plan import plan_id_in, plan_of
from kustomize_controller.reconcile.gate.windows import InvalidSyncWindowError, SyncWindow, evaluate, parse_windows
from kustomize_controller.reconcile.notify import SEVERITY_ERROR, SEVERITY_INFO
from kustomize_controller.runtime.clock import Clock

_log = structlog.get_logger()

READY_BEFORE_KEY = "ready_before"
#: the conditions of the gates (removed while their gate is off)
GATE_CONDITIONS = (APPROVED_CONDITION, SYNC_ALLOWED_CONDITION)
PENDING_KEY = "pending_plan"  # the hold's reason, or None: nothing pending (the gauge's series removed)

Planner = Callable[[], Awaitable[tuple[list[PreviewChange], list[str]]]]


class GateHeld(Exception):
    """The plan waits (approval or window); the status says why. Not a failure."""

    def __init__(self, message: str, *, requeue_after: float) -> None:
        super().__init__(message)
        self.requeue_after = requeue_after


class GatePlanError(Exception):
    """The dry-run plan failed for some objects (the message lists them)."""


class GateRecordError(Exception):
    """The record of the approval taken up could not be written: nothing was applied."""


@dataclass(frozen=True)
class GateOptions:
    sync_windows_configmap: tuple[str, str] | None = None  # --sync-windows-configmap (namespace, name)
    fleet_ttl: float = 10.0


def remember_ready(ctx: ReconcileContext) -> None:
    """Keep the ``Ready`` condition as it was before this reconcile (a held plan puts it back)."""
    ctx.extra[READY_BEFORE_KEY] = conditions.get(ctx.conditions, READY)


def rechecking_held_plan(ctx: ReconcileContext) -> bool:
    """True when this reconcile looks again at a revision the gate held for the current generation: like
    re-verifying an applied revision, its progress stays in memory (Ready does not flap every interval)."""
    status = ctx.ks.status
    return (
        bool(ctx.revision)
        and status.last_attempted_revision == ctx.revision
        and status.observed_generation == ctx.generation
        and any(conditions.is_false(status.conditions, t) for t in GATE_CONDITIONS)
    )


def approval_used(ctx: ReconcileContext) -> None:
    """The apply of an approved plan wrote to the cluster: its approval is used up (``approval.py``). The
    ``applying`` record in ``Approved`` becomes ``used``, written with the next status write."""
    approved = conditions.get(ctx.conditions, APPROVED_CONDITION)
    record = record_in(approved.message) if approved is not None else None
    if approved is None or record is None or record.state != APPLYING:
        return
    message = with_record(approved.message, None)
    ctx.mark_true(APPROVED_CONDITION, approved.reason, with_record(f"{message} and applied", record.used()))


class ChangeGate:
    """Approval and sync windows for every reconcile of one controller (module contract)."""

    def __init__(self, *, client: KubeClient, clock: Clock, options: GateOptions) -> None:
        self._clock = clock
        ref = options.sync_windows_configmap
        self._fleet = (FleetWindows(client=client, clock=clock, namespace=ref[0], name=ref[1], ttl=options.fleet_ttl)
                       if ref is not None else None)

    async def windows(self, ctx: ReconcileContext) -> tuple[list[SyncWindow], str]:
        """The windows that apply to the Kustomization, and the error when some are invalid."""
        meta = ctx.ks.metadata
        subject = f"Kustomization/{meta.namespace}/{meta.name}"
        found: list[SyncWindow] = []
        errors: list[str] = []
        text = meta.annotations.get(SYNC_WINDOWS_ANNOTATION)
        if text is not None:
            try:
                found.extend(parse_windows(text, source=f"{subject} annotation {SYNC_WINDOWS_ANNOTATION}"))
            except InvalidSyncWindowError as err:
                errors.append(str(err))
        if self._fleet is not None:
            try:
                found.extend(await self._fleet.windows_for(namespace=meta.namespace or "", name=meta.name or "",
                                                           labels=meta.labels))
            except InvalidSyncWindowError as err:
                errors.append(str(err))
        return found, "; ".join(errors)

    async def check(self, ctx: ReconcileContext, *, plan: Planner) -> None:
        """Return to apply; raise ``GateHeld`` to hold (module contract)."""
        ks = ctx.ks
        mode = approval_mode(ks.metadata.annotations)  # validated at the start of the reconcile
        windows, error = await self.windows(ctx)
        ctx.extra[PENDING_KEY] = None
        if mode is ApprovalMode.AUTO:
            conditions.delete(ctx.conditions, APPROVED_CONDITION)
            if not windows and not error:
                conditions.delete(ctx.conditions, SYNC_ALLOWED_CONDITION)
                return
        state = evaluate(windows, self._clock.now()) if windows else None
        if mode is ApprovalMode.AUTO and not error and state is not None and state.allowed:
            self._set(ctx, SYNC_ALLOWED_CONDITION, window_verdict(state))  # nothing to hold: no plan needed
            return
        changes, errors = await plan()
        if errors:
            raise GatePlanError("\n".join(errors))
        pending = plan_of(ctx.revision, changes)
        requested = ks.metadata.annotations.get(RECONCILE_REQUEST_ANNOTATION)
        annotations = ks.metadata.annotations
        previous = {t: conditions.get(ctx.conditions, t) for t in GATE_CONDITIONS}
        approved_before = previous[APPROVED_CONDITION]
        approved = approved_plan(annotations)
        decision = decide(GateInput(
            approval=mode,
            approved=approved,
            plan=pending,
            windows=state,
            windows_error=error,
            manual_request=requested is not None and requested != ks.status.last_handled_reconcile_at,
            subject=f"{ks.metadata.name} -n {ks.metadata.namespace}",
            approval_key=approval_key(approved, approved_at(annotations)),
            record=record_in(approved_before.message) if approved_before is not None else None,
            recorded=approved_before is not None,
        ))
        self._set(ctx, APPROVED_CONDITION, decision.approved)
        self._set(ctx, SYNC_ALLOWED_CONDITION, decision.sync_allowed)
        if decision.apply:
            if not pending.empty:
                _log.info("plan passed the change gate", plan=pending.id, changes=pending.counts_text(),
                          approval=decision.record.key if decision.takes_approval and decision.record else None)
            if decision.takes_approval:
                await self._record_taken(ctx)
            return
        await self._hold(ctx, decision, previous, plan_id=pending.id)

    async def _record_taken(self, ctx: ReconcileContext) -> None:
        """The approval's ``applying`` record goes to the status before the first write of its plan (a
        controller that dies after it tells, from the live objects, whether the plan was written)."""
        ctx.hold_progress = False  # the reconcile writes: its progress is shown as for any change
        try:
            await ctx.record("conditions")
        except KubeError as err:
            raise GateRecordError(f"failed to record the approval: {err}") from err

    def _set(self, ctx: ReconcileContext, type_: str, verdict: Verdict | None) -> None:
        if verdict is None:
            conditions.delete(ctx.conditions, type_)
        elif verdict.status:
            ctx.mark_true(type_, verdict.reason, verdict.message)
        else:
            ctx.mark_false(type_, verdict.reason, verdict.message)

    async def _hold(
        self, ctx: ReconcileContext, decision: Decision, previous: dict[str, Condition | None], *, plan_id: str
    ) -> None:
        ks = ctx.ks
        reason = decision.held_by
        verdict_type = APPROVED_CONDITION if reason == APPROVAL_REQUIRED_REASON else SYNC_ALLOWED_CONDITION
        verdict = decision.approved if verdict_type == APPROVED_CONDITION else decision.sync_allowed
        message = verdict.message if verdict is not None else reason
        before = ctx.extra.get(READY_BEFORE_KEY)
        if isinstance(before, Condition) and ks.status.last_applied_revision:
            ctx.conditions[:] = [before if c.type == READY else c for c in ctx.conditions]
            if conditions.get(ctx.conditions, READY) is None:
                ctx.conditions.append(before)
        else:
            ctx.mark_false(READY, reason, message)
        conditions.delete(ctx.conditions, RECONCILING)
        ctx.extra[PENDING_KEY] = reason
        old = previous.get(verdict_type)
        if old is None or old.reason != reason or plan_id_in(old.message) != plan_id:
            _log.info(message, revision=ctx.revision, plan=plan_id)
            await ctx.notifier.emit(
                ctx.obj,
                severity=SEVERITY_ERROR if reason == INVALID_SYNC_WINDOW_REASON else SEVERITY_INFO,
                ready_reason=reason,
                message=message,
                revision=ctx.revision,
                origin_revision=ctx.origin_revision,
            )
        if reason == INVALID_SYNC_WINDOW_REASON:
            requeue = ks.get_retry_interval()
        elif decision.opens_at is not None:
            requeue = min(ks.get_interval(), max(timedelta(seconds=1), decision.opens_at - self._clock.now()))
        else:
            requeue = ks.get_interval()
        raise GateHeld(message, requeue_after=requeue.total_seconds())
