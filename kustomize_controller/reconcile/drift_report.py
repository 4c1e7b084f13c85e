"""Detect-only drift in a reconcile: choose the policy, keep the record, report what was left drifted.

``DetectOnlyDrift`` is owned by the ``ApplyStep`` (one per controller) and used in three places of a
reconcile:

- ``policy(ctx, digest)`` before the apply: ``None`` in ``enabled`` mode (the record of the
  Kustomization is dropped), a ``WarnPolicy`` for the engine in ``warn`` mode (``drift_mode.py``).
- ``remember(ctx, policy, objects, written=...)`` after the apply (``written`` only when it failed):
  updates the per-object record.
- ``report(ctx, policy)`` after a successful apply, where it is reported:
  * the ``Drifted`` condition: ``True``/``DriftDetected`` with ``N object(s) drifted ...`` and one
    ``Kind/namespace/name`` per line (trimmed at 32 KiB like every condition message), ``False``/
    ``NoDrift`` when nothing drifted, removed in ``enabled`` mode;
  * one ``DriftDetected`` Warning event per distinct drift: emitted when the condition's message
    changes, which is persisted in the status, so repeats across intervals and restarts are silent
    and a drift that goes away and comes back is reported again;
  * one ``drift detected`` warning log line per object with its drifted field paths;
  * ``ctx.extra["drift_objects"]`` for the ``gotk_drift_objects`` gauge (``None``: remove the series).

``Ready`` is untouched: it keeps saying whether the revision was applied (see docs/drift.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import structlog

from kustomize_controller.api.drift import (
    DRIFT_DETECTED_REASON,
    DRIFTED_CONDITION,
    NO_DRIFT_REASON,
    DriftMode,
    drift_mode,
)
from kustomize_controller.apply.detect_only import HeldDrift
from kustomize_controller.apply.objects import Object, ObjRef
from kustomize_controller.reconcile import conditions
from kustomize_controller.reconcile.context import ReconcileContext
from kustomize_controller.reconcile.drift_mode import AppliedRecords, WarnPolicy, next_record, warn_policy
from kustomize_controller.reconcile.notify import SEVERITY_ERROR

_log = structlog.get_logger()

DRIFT_OBJECTS_KEY = "drift_objects"


def drift_message(drifts: Sequence[HeldDrift]) -> str:
    subjects = sorted({str(d.ref) for d in drifts})
    return (
        f"{len(subjects)} object(s) drifted from the applied revision and were not corrected "
        f"(drift-detection: warn):\n" + "\n".join(subjects)
    )


def event_message(drifts: Sequence[HeldDrift]) -> str:
    lines = sorted({d.describe() for d in drifts})
    return "drift detected, not corrected (drift-detection: warn):\n" + "\n".join(lines)


def _owner(ctx: ReconcileContext) -> str:
    meta = ctx.ks.metadata
    return f"{meta.namespace}/{meta.name}/{meta.uid or ''}"


class DetectOnlyDrift:
    """Per-controller state of detect-only drift (module contract)."""

    def __init__(self, *, records: AppliedRecords | None = None) -> None:
        self._records = records or AppliedRecords()

    def policy(self, ctx: ReconcileContext, *, digest: str) -> WarnPolicy | None:
        """The engine's policy; the mode was validated at the start of the reconcile."""
        owner = _owner(ctx)
        if drift_mode(ctx.ks.metadata.annotations) is DriftMode.ENABLED:
            self._records.forget(owner)
            return None
        return warn_policy(ctx.ks.status.history, digest=digest, known=self._records.get(owner))

    def remember(
        self,
        ctx: ReconcileContext,
        policy: WarnPolicy | None,
        objects: Iterable[Object],
        *,
        written: Iterable[ObjRef] | None = None,
    ) -> None:
        if policy is None:
            return
        owner = _owner(ctx)
        self._records.put(owner, next_record(self._records.get(owner), objects, written=written))

    async def report(self, ctx: ReconcileContext, policy: WarnPolicy | None) -> None:
        if policy is None:
            conditions.delete(ctx.conditions, DRIFTED_CONDITION)
            ctx.extra[DRIFT_OBJECTS_KEY] = None
            return
        drifts = policy.drifts
        ctx.extra[DRIFT_OBJECTS_KEY] = len({d.ref for d in drifts})
        if not drifts:
            ctx.mark_false(DRIFTED_CONDITION, NO_DRIFT_REASON, "No drift detected")
            return
        for drift in drifts:
            _log.warning(
                "drift detected, not corrected (drift-detection: warn)",
                object=str(drift.ref),
                fields=list(drift.paths),
                recreate=drift.recreate,
                revision=ctx.revision,
            )
        before = conditions.get(ctx.conditions, DRIFTED_CONDITION)
        previous = (before.status, before.message) if before is not None else None
        ctx.mark_true(DRIFTED_CONDITION, DRIFT_DETECTED_REASON, drift_message(drifts))
        after = conditions.get(ctx.conditions, DRIFTED_CONDITION)
        if after is not None and previous != (after.status, after.message):
            await ctx.notifier.emit(
                ctx.obj,
                severity=SEVERITY_ERROR,
                ready_reason=DRIFT_DETECTED_REASON,
                message=event_message(drifts),
                revision=ctx.revision,
                origin_revision=ctx.origin_revision,
            )
