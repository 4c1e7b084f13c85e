"""The state one reconcile carries: the object, its status patcher, and condition shortcuts.

``ReconcileContext`` binds the object's generation and the clock to the condition helpers so the
pipeline reads like upstream (``ctx.mark_false(READY, reason, msg)``), and patches status through
the one ``StatusPatcher`` that knows what was written last.

Two kinds of write: ``progress()`` publishes an in-flight state (upstream's "Fetching/Building/
Detecting drift/Running health checks" patches) and is skipped while ``hold_progress`` is set;
``patch()`` always writes (the finalizer, the final status of every exit).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kustomize_controller.api.kustomization import Kustomization
from kustomize_controller.api.meta import ConditionType, Reason
from kustomize_controller.reconcile import conditions
from kustomize_controller.reconcile.interrupt import Interrupt
from kustomize_controller.reconcile.notify import SEVERITY_ERROR, SEVERITY_INFO, Notifier
from kustomize_controller.reconcile.status import StatusPatcher
from kustomize_controller.runtime.clock import Clock

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

    async def progress(self) -> None:
        if not self.hold_progress:
            await self.patcher.patch(self.ks)

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
