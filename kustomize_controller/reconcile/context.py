"""The state one reconcile carries: the object, its status patcher, and condition shortcuts.

``ReconcileContext`` binds the object's generation and the clock to the condition helpers so the
pipeline reads like upstream (``ctx.mark_false(READY, reason, msg)``), and patches status through
the one ``StatusPatcher`` that knows what was written last.

Two kinds of write: ``progress()`` publishes an in-flight state (upstream's "Fetching/Building/
Detecting drift/Running health checks" patches) and is skipped while ``hold_progress`` is set or
``Ready`` is ``False`` (a failed step's state: the final patch publishes it);
``patch()`` always writes (the finalizer, the final status of every exit); ``record(*fields)`` writes
only the fields named (the inventory recorded before an apply).

Progress is also held during the first ``progress_delay`` seconds of a reconcile: a reconcile that
ends sooner writes only its final status (upstream writes and overwrites three or four progress states
within a few hundred milliseconds). ``publishing_progress()`` owns a timer that, when the delay
passes with the reconcile still running, publishes the latest held state; from then on every
``progress()`` writes at once, as upstream. ``progress_delay = 0`` is upstream's behaviour.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from kustomize_controller.api.kustomization import Kustomization
from kustomize_controller.api.meta import ConditionType, Reason
from kustomize_controller.reconcile import conditions
from kustomize_controller.reconcile.interrupt import Interrupt
from kustomize_controller.reconcile.notify import SEVERITY_ERROR, SEVERITY_INFO, Notifier
from kustomize_controller.reconcile.status import StatusPatcher
from kustomize_controller.runtime.clock import Clock

_log = structlog.get_logger()

READY = ConditionType.READY
RECONCILING = ConditionType.RECONCILING
STALLED = ConditionType.STALLED
HEALTHY = ConditionType.HEALTHY


@dataclass
class ReconcileContext:
    ks: Kustomization
    obj: Mapping[str, Any]
    patcher: StatusPatcher
    clock: Clock
    notifier: Notifier
    started: float
    revision: str = ""
    origin_revision: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    interrupt: Interrupt | None = None
    """Fires when the object is enqueued again (gate ``CancelHealthCheckOnNewRevision``)."""
    hold_progress: bool = False
    """Set while re-verifying an already applied revision: progress stays in memory, only the final
    status is written (see ``apply_step.reverifying``)."""
    progress_delay: float = 0.0
    """Seconds from the start of the reconcile during which progress is held (see the module docstring)."""
    _progress_pending: bool = False
    _delay_passed: bool = False

    @property
    def generation(self) -> int:
        return self.ks.metadata.generation or 0

    @property
    def conditions(self) -> list[Any]:
        return self.ks.status.conditions

    def mark_true(self, type_: str, reason: str, message: str) -> None:
        conditions.mark_true(self.conditions, type_, reason, message, generation=self.generation, now=self.clock.now())

    def mark_false(self, type_: str, reason: str, message: str) -> None:
        conditions.mark_false(self.conditions, type_, reason, message, generation=self.generation, now=self.clock.now())

    def mark_unknown(self, type_: str, reason: str, message: str) -> None:
        conditions.mark_unknown(
            self.conditions, type_, reason, message, generation=self.generation, now=self.clock.now()
        )

    def mark_reconciling(self, message: str) -> None:
        conditions.mark_reconciling(
            self.conditions, Reason.PROGRESSING, message, generation=self.generation, now=self.clock.now()
        )

    def mark_stalled(self, reason: str, message: str) -> None:
        conditions.mark_stalled(self.conditions, reason, message, generation=self.generation, now=self.clock.now())

    def ready_reason(self) -> str:
        return conditions.reason(self.conditions, READY)

    def elapsed(self) -> float:
        return self.clock.monotonic() - self.started

    async def patch(self) -> None:
        await self.patcher.patch(self.ks)

    def _publishes_progress(self) -> bool:
        """Progress only: a failure (``Ready=False``, set when a step fails) is published by the final
        patch, once the reconciler decided how to report it. Written by the timer while the failed
        step's clean-up ran (a checkout's view removed in a worker thread), it showed a reconcile that
        the reconciler then retried quickly (reconcile/unreachable.py) as ``ReconciliationFailed``."""
        return not self.hold_progress and not conditions.is_false(self.conditions, READY)

    async def record(self, *fields: str) -> None:
        """Write these top-level status fields now, whatever progress is held, in one try; nothing else."""
        await self.patcher.patch_fields(self.ks, fields, attempts=1)

    async def progress(self) -> None:
        if not self._publishes_progress():
            return
        if self.progress_delay > 0 and not self._delay_passed and self.elapsed() < self.progress_delay:
            self._progress_pending = True  # the timer of ``publishing_progress`` writes it if still running
            return
        self._progress_pending = False
        await self.patcher.patch(self.ks)

    @contextlib.asynccontextmanager
    async def publishing_progress(self) -> AsyncIterator[None]:
        """Run the body with the progress timer; the timer never outlives it."""
        if self.progress_delay <= 0:
            yield
            return
        timer = asyncio.create_task(self._publish_when_delay_passes())
        try:
            yield
        finally:
            current = asyncio.current_task()
            if self._delay_passed and not timer.done() and not (current and current.cancelling()):
                # its patch is in flight: cut short, the patcher would not record what the server
                # may already have applied, and the final patch would be computed on a stale base
                await asyncio.wait({timer})
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer

    async def _publish_when_delay_passes(self) -> None:
        await self.clock.sleep(max(0.0, self.progress_delay - self.elapsed()))
        self._delay_passed = True
        # Not behind another write (the inventory recorded before an apply, with its retries): by the time
        # this one got its turn the state may be a failure, not progress. The next step's progress(), or
        # the final patch, writes what is pending.
        if self._progress_pending and self._publishes_progress() and not self.patcher.busy:
            self._progress_pending = False
            try:
                await self.patcher.patch(self.ks)
            except Exception as err:  # the final status patch reports for real; this one only informs
                _log.warning("progress status patch failed", error=str(err))

    async def event(
        self,
        message: str,
        *,
        error: bool = False,
        revision: str | None = None,
        origin_revision: str | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        await self.notifier.emit(
            self.obj,
            severity=SEVERITY_ERROR if error else SEVERITY_INFO,
            ready_reason=self.ready_reason(),
            message=message,
            revision=self.revision if revision is None else revision,
            origin_revision=self.origin_revision if origin_revision is None else origin_revision,
            extra=extra,
        )
