"""The Kustomization reconciler: upstream's pipeline, step by step, always writing status on the way out.

``reconcile(request)`` (reference §5):
    read → (deleting? finalize) → add finalizer, requeue → suspended? stop → compile healthCheckExprs
    → feature-gate check → resolve source → artifact? → dependsOn → ``_apply_revision``:
    fetch → build → apply → inventory → prune → health → Ready.

Every exit but a cancellation (shutdown) runs ``_finalize_status`` (lastHandledReconcileAt,
Reconciling/observedGeneration rules, one status patch), records the duration metric, and — when
Ready — emits "Reconciliation finished".
Results follow the §5.12 table: success → interval ± jitter; failure inside the pipeline →
retryInterval (no backoff); health wait cancelled by a new enqueue (``hooks``; for a wait released
from its worker also by the object's deletion or suspension) → Ready=False ``HealthCheckCanceled`` and
an immediate requeue, or nothing written when the object is gone; missing artifact / dependencies →
``--requeue-dependency``; transient API errors → raised (exponential backoff); terminal configuration
errors → ``TerminalError``. A pipeline failure caused only by an unreachable API server (connection
refused, disconnected, 5xx) is retried within seconds and shown as still in progress, not reported as
``ReconciliationFailed`` until those quick retries ran out (``reconcile/unreachable.py``).

A build, fetch or validation failure never writes to the cluster and never touches the inventory:
the apply engine runs only on a successful build, prune only after a successful apply.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

import structlog

from kustomize_controller.api.duration import format_duration, format_seconds
from kustomize_controller.api.kustomization import API_VERSION, KIND, InvalidKustomizationError, parse_kustomization
from kustomize_controller.api.meta import FINALIZER, RECONCILE_REQUEST_ANNOTATION, TERMINAL_ERROR_PREFIX, Reason
from kustomize_controller.apply.cel import build_status_readers, compile_bool_expression
from kustomize_controller.apply.errors import InvalidCELExpressionError
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import NotFoundError
from kustomize_controller.kustomize.pipeline import BuildPipeline
from kustomize_controller.reconcile import conditions
from kustomize_controller.reconcile.apply_step import ApplyStep, ApplyStepOptions, PipelineFailure
from kustomize_controller.reconcile.context import READY, RECONCILING, ReconcileContext
from kustomize_controller.reconcile.dependencies import (
    BoolProgram,
    DependencyNotReadyError,
    DependencyTerminalError,
    check_dependencies,
)
from kustomize_controller.reconcile.drift_report import DRIFT_OBJECTS_KEY
from kustomize_controller.reconcile.finalizer import finalize
from kustomize_controller.reconcile.gate.gate import GATE_CONDITIONS, PENDING_KEY, GateHeld
from kustomize_controller.reconcile.interrupt import EnqueueHooks, HealthCheckCanceledError
from kustomize_controller.reconcile.metrics import GotkMetrics
from kustomize_controller.reconcile.notify import COMMIT_STATUS_KEY, COMMIT_STATUS_UPDATE, Notifier
from kustomize_controller.reconcile.ownwrites import OwnWrites
from kustomize_controller.reconcile.requeue import jittered
from kustomize_controller.reconcile.source import (
    AccessDeniedError,
    SourceAccess,
    SourceNotFoundError,
    SourceReader,
    SourceReadError,
    get_source,
    origin_revision,
)
from kustomize_controller.reconcile.status import StatusPatcher
from kustomize_controller.reconcile.unreachable import QuickRetries, unreachable_cause
from kustomize_controller.runtime.clock import Clock
from kustomize_controller.runtime.controller import ReconcileError, Request, Result, TerminalError

# Reconcile logs carry the controller, name, namespace and reconcile_id bound by the runtime.
_log = structlog.get_logger()
_QUICK_RETRY = "quick_retry"
_HISTORY_BEFORE = "history_before"


class KustomizationReader(Protocol):
    async def get_kustomization(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The object as last seen (informer cache), or None when it does not exist."""
        ...


@dataclass(frozen=True)
class ReconcilerOptions:
    requeue_dependency: timedelta = timedelta(seconds=30)
    interval_jitter_percentage: int = 5
    source_access: SourceAccess = field(default_factory=SourceAccess)
    additive_cel_dependency_check: bool = False
    object_level_workload_identity: bool = False
    apply: ApplyStepOptions = field(default_factory=ApplyStepOptions)
    # progress states are written only once a reconcile has run this long (context.py; 0: upstream)
    progress_status_delay: float = 0.0
    cancel_health_on_any_enqueue: bool = True
    """With ``hooks``: any enqueue event cancels a health wait (``CancelHealthCheckOnNewRevision``);
    False: only the object's deletion, disappearance or suspension does (health waits released from
    their worker, see ``apply_step``)."""
    first_read_live: bool = False
    """Read each Kustomization from the API server on its first reconcile, not from the informer cache
    (leader election: the cache was filled while another replica led; ``ownwrites.py``)."""


def _compile_ready_expr(expression: str) -> BoolProgram:
    program = compile_bool_expression(expression, variables=("self", "dep"))
    return program.evaluate


class KustomizationReconciler:
    def __init__(
        self,
        *,
        client: KubeClient,
        reader: KustomizationReader,
        sources: SourceReader,
        pipeline: BuildPipeline,
        notifier: Notifier,
        metrics: GotkMetrics,
        clock: Clock,
        options: ReconcilerOptions,
        rng: random.Random | None = None,
        hooks: EnqueueHooks | None = None,
    ) -> None:
        """``hooks``: set when ``CancelHealthCheckOnNewRevision`` is on or health waits release their
        worker; the application dispatches enqueue events to it and health waits are cancelled by them
        (by which ones: ``options.cancel_health_on_any_enqueue``)."""
        self._client = client
        self._reader = reader
        # the cache may not show our last status write yet: such a copy is read again (ownwrites.py)
        self._own_writes = OwnWrites(self._get_live, first_read_live=options.first_read_live)
        self._sources = sources
        self._notifier = notifier
        self._metrics = metrics
        self._clock = clock
        self._options = options
        self._rng = rng or random.Random()
        self._hooks = hooks
        self._apply = ApplyStep(client=client, pipeline=pipeline, clock=clock, options=options.apply)
        # failures that only meant "the API server could not be reached" (reconcile/unreachable.py)
        self._quick_retries = QuickRetries()

    def observed(self, obj: dict[str, Any]) -> None:
        """The Kustomization informer stored ``obj`` (wired by the application; ``ownwrites.py``)."""
        self._own_writes.observed(obj)

    async def reconcile(self, request: Request) -> Result:
        obj = await self._reader.get_kustomization(request.namespace, request.name)
        if obj is not None:
            obj = await self._own_writes.fresh(obj)
        if obj is None:
            self._own_writes.forget(request.namespace, request.name)
            self._forget_metrics(name=request.name, namespace=request.namespace)
            return Result()
        try:
            ks = parse_kustomization(obj)
        except InvalidKustomizationError as err:
            # The CRD schema keeps such objects out of a real cluster; say why we cannot proceed.
            _log.error("invalid Kustomization", error=str(err))
            raise TerminalError(str(err)) from err
        ctx = ReconcileContext(
            ks=ks,
            obj=obj,
            patcher=StatusPatcher(client=self._own_writes.patcher(self._client), obj=obj, clock=self._clock),
            clock=self._clock,
            notifier=self._notifier,
            started=self._clock.monotonic(),
            progress_delay=self._options.progress_status_delay,
        )
        with contextlib.ExitStack() as stack:
            if self._hooks is not None:
                final_only = not self._options.cancel_health_on_any_enqueue
                ctx.interrupt = stack.enter_context(self._hooks.listen(request, final_only=final_only))
            try:
                async with ctx.publishing_progress():
                    result = await self._reconcile(ctx)
            except asyncio.CancelledError:
                # shutdown cancelled this reconcile (upstream: its context): no status write on the way
                # out, as upstream's patch with a cancelled context fails; the next run starts over
                raise
            except BaseException:
                self._forget_quick_retries(ctx, request)
                await self._finish(ctx)
                raise
            self._forget_quick_retries(ctx, request)
            await self._finish(ctx)
            return result

    def _forget_metrics(self, *, name: str, namespace: str) -> None:
        """A deleted Kustomization's series go: Flux's, and its token cache events (as upstream)."""
        self._metrics.delete(name=name, namespace=namespace)
        identity = self._options.apply.workload_identity
        if identity is not None and identity.cache is not None:
            identity.cache.delete_events_for(kind=KIND, name=name, namespace=namespace)

    def _forget_quick_retries(self, ctx: ReconcileContext, request: Request) -> None:
        if not ctx.extra.get(_QUICK_RETRY):
            self._quick_retries.reset((request.namespace, request.name))

    async def _finish(self, ctx: ReconcileContext) -> None:
        ks = ctx.ks
        name, namespace = ks.metadata.name or "", ks.metadata.namespace or ""
        if ctx.extra.get("gone"):
            self._forget_metrics(name=name, namespace=namespace)
            return
        await self._finalize_status(ctx)
        if ks.metadata.deletion_timestamp is not None and FINALIZER not in ks.metadata.finalizers:
            self._forget_metrics(name=name, namespace=namespace)
            return
        self._metrics.record_duration(name=name, namespace=namespace, seconds=ctx.elapsed())
        self._metrics.record_suspend(name=name, namespace=namespace, suspended=ks.spec.suspend)
        if PENDING_KEY in ctx.extra:  # set by the change gate: the hold's reason, None when nothing waits
            self._metrics.record_pending(name=name, namespace=namespace, reason=ctx.extra[PENDING_KEY])
        if DRIFT_OBJECTS_KEY in ctx.extra:  # set by the apply step: a count in warn mode, None otherwise
            self._metrics.record_drift(name=name, namespace=namespace, objects=ctx.extra[DRIFT_OBJECTS_KEY])
        for condition in ks.status.conditions:
            self._metrics.record_condition(
                name=name, namespace=namespace, type_=condition.type, status=condition.status
            )
        self._metrics.forget_absent_conditions(name=name, namespace=namespace, types=GATE_CONDITIONS,
                                               present={c.type for c in ks.status.conditions})
        if ks.spec.suspend or not conditions.is_true(ks.status.conditions, READY) or ctx.extra.get(PENDING_KEY):
            return  # a held plan already said so (one event per plan)
        message = (
            f"Reconciliation finished in {format_seconds(ctx.elapsed())}, "
            f"next run in {format_duration(ks.get_interval())}"
        )
        _log.info(message, revision=ks.status.last_attempted_revision)
        await ctx.event(
            message,
            revision=ks.status.last_applied_revision or "",
            origin_revision=ks.status.last_applied_origin_revision or "",
            extra={COMMIT_STATUS_KEY: COMMIT_STATUS_UPDATE},
        )

    async def _finalize_status(self, ctx: ReconcileContext) -> None:
        ks = ctx.ks
        requested = ks.metadata.annotations.get(RECONCILE_REQUEST_ANNOTATION)
        if requested is not None:
            ks.status.last_handled_reconcile_at = requested
        if conditions.is_true(ks.status.conditions, READY):
            conditions.delete(ks.status.conditions, RECONCILING)
            ks.status.observed_generation = ctx.generation
        reconciling = conditions.get(ks.status.conditions, RECONCILING)
        if conditions.is_false(ks.status.conditions, READY) and reconciling is not None:
            reconciling.reason = Reason.PROGRESSING_WITH_RETRY
        await ctx.patch()

    async def _reconcile(self, ctx: ReconcileContext) -> Result:
        ks = ctx.ks
        if ks.metadata.deletion_timestamp is not None:
            await finalize(ctx, client=self._client, tenancy=self._options.apply.tenancy)
            return Result()

        if FINALIZER not in ks.metadata.finalizers:
            ks.metadata.finalizers.append(FINALIZER)
            return Result(requeue=True)

        if ks.spec.suspend:
            _log.info("Reconciliation is suspended for this object")
            return Result()

        try:
            readers = build_status_readers(ks.spec.health_check_exprs)
        except InvalidCELExpressionError as err:
            await self._terminal(ctx, Reason.INVALID_CEL_EXPRESSION, f"{TERMINAL_ERROR_PREFIX}{err}")
            ks.status.observed_generation = ctx.generation
            raise TerminalError(str(err)) from err

        decryption = ks.spec.decryption
        if decryption and decryption.service_account_name and not self._options.object_level_workload_identity:
            message = (
                "to use spec.decryption.serviceAccountName for decryption authentication please enable the "
                "ObjectLevelWorkloadIdentity feature gate in the controller"
            )
            await self._terminal(ctx, Reason.FEATURE_GATE_DISABLED, message)
            return Result()

        try:
            source = await get_source(ks, reader=self._sources, access=self._options.source_access)
        except SourceNotFoundError as err:
            ctx.mark_false(READY, Reason.ARTIFACT_FAILED, str(err))
            _log.info(f"Source '{ks.spec.source_ref.kind}/{ks.spec.source_ref.name}' not found")
            return Result(requeue_after=ks.get_retry_interval().total_seconds())
        except AccessDeniedError as err:
            await self._terminal(ctx, Reason.ACCESS_DENIED, str(err))
            raise TerminalError(str(err)) from err
        except SourceReadError as err:
            ctx.mark_false(READY, Reason.ARTIFACT_FAILED, str(err))
            raise ReconcileError(str(err)) from err  # transient: retried with backoff

        artifact = source.get_artifact()
        requeue_dependency = self._options.requeue_dependency
        if artifact is None:
            message = f"Source artifact not found, retrying in {format_duration(requeue_dependency)}"
            ctx.mark_false(READY, Reason.ARTIFACT_FAILED, message)
            _log.info(message)
            return Result(requeue_after=requeue_dependency.total_seconds())
        ctx.revision = artifact.revision
        ctx.origin_revision = origin_revision(source)

        if ks.spec.depends_on:
            try:
                await check_dependencies(
                    ks,
                    ctx.obj,
                    revision=ctx.revision,
                    get=self._get_dependency,
                    compile_ready_expr=_compile_ready_expr,
                    additive_cel=self._options.additive_cel_dependency_check,
                )
            except DependencyTerminalError as err:
                await self._terminal(ctx, Reason.INVALID_CEL_EXPRESSION, f"{TERMINAL_ERROR_PREFIX}{err}")
                ks.status.observed_generation = ctx.generation
                raise TerminalError(str(err)) from err
            except DependencyNotReadyError as err:
                ctx.mark_false(READY, Reason.DEPENDENCY_NOT_READY, str(err))
                message = (
                    f"Dependencies do not meet ready condition, retrying in {format_duration(requeue_dependency)}"
                )
                _log.info(message)
                await ctx.event(message)
                return Result(requeue_after=requeue_dependency.total_seconds())
            _log.info("All dependencies are ready, proceeding with reconciliation")

        try:
            # an attempt retried quickly (unreachable API server) leaves no history entry of its own; a
            # copy of the list is a snapshot, upsert never changes an entry in place (history.py)
            ctx.extra[_HISTORY_BEFORE] = list(ks.status.history)
            await self._apply.run(ctx, artifact=artifact, readers=readers)
        except GateHeld as held:
            # the plan waits for an approval or a sync window; the status says which (reconcile/gate)
            return Result(requeue_after=held.requeue_after)
        except HealthCheckCanceledError as canceled:
            if await self._reader.get_kustomization(ks.metadata.namespace or "", ks.metadata.name or "") is None:
                # deleted while waiting (its finalizer removed by hand): nothing left to write to
                _log.info("Kustomization gone, health checks stopped")
                ctx.extra["gone"] = True
                return Result()
            trigger = str(canceled.source)
            ctx.mark_false(READY, Reason.HEALTH_CHECK_CANCELED, f"New reconciliation triggered by {trigger}")
            _log.info("New reconciliation triggered, canceling health checks", trigger=trigger)
            await ctx.event(f"Health checks canceled due to new reconciliation triggered by {trigger}")
            # Requeue at once: if the event that interrupted us was deduplicated against this very
            # reconcile, the new revision must still be picked up (upstream's reasoning).
            return Result(requeue=True)
        except PipelineFailure as failure:
            if failure.artifact_not_found:
                message = (
                    f"Source is not ready, artifact not found, retrying in {format_duration(requeue_dependency)}"
                )
                ctx.mark_false(READY, Reason.ARTIFACT_FAILED, message)
                _log.info(message)
                return Result(requeue_after=requeue_dependency.total_seconds())
            quick = self._retry_soon(ctx, failure)
            if quick is not None:
                return quick
            retry = ks.get_retry_interval()
            _log.error(
                f"Reconciliation failed after {format_seconds(ctx.elapsed())}, "
                f"next try in {format_duration(retry)}",
                revision=ctx.revision,
                error=failure.message,
            )
            await ctx.event(failure.message, error=True)
            return Result(requeue_after=retry.total_seconds())
        interval = jittered(
            ks.get_interval(), percentage=self._options.interval_jitter_percentage, rng=self._rng
        )
        return Result(requeue_after=interval.total_seconds())

    def _retry_soon(self, ctx: ReconcileContext, failure: PipelineFailure) -> Result | None:
        """A failure caused only by an unreachable API server: shown as a reconcile still in progress and
        retried within seconds, until the quick retries ran out (reconcile/unreachable.py)."""
        if unreachable_cause(failure) is None:
            return None
        delay = self._quick_retries.next_delay((ctx.ks.metadata.namespace or "", ctx.ks.metadata.name or ""))
        if delay is None:
            return None
        first_line = failure.message.strip().splitlines()[0] if failure.message.strip() else ""
        message = f"API server unreachable, retrying in {format_duration(timedelta(seconds=delay))}: {first_line}"
        ctx.mark_unknown(READY, Reason.PROGRESSING, "Reconciliation in progress")
        conditions.mark_reconciling(
            ctx.conditions, Reason.PROGRESSING_WITH_RETRY, message, generation=ctx.generation, now=self._clock.now()
        )
        ctx.extra[_QUICK_RETRY] = True
        if _HISTORY_BEFORE in ctx.extra:
            ctx.ks.status.history = ctx.extra[_HISTORY_BEFORE]
        _log.info(message, revision=ctx.revision)
        return Result(requeue_after=delay)

    async def _terminal(self, ctx: ReconcileContext, reason: str, message: str) -> None:
        ctx.mark_false(READY, reason, message)
        ctx.mark_stalled(reason, message)
        _log.error(message)
        await ctx.event(message, error=True)

    async def _get_live(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self._client.get(API_VERSION, KIND, name, namespace)
        except NotFoundError:
            return None

    async def _get_dependency(self, namespace: str, name: str) -> dict[str, Any]:
        # Uncached read, as upstream's APIReader: a dependency's readiness must be current.
        return await self._client.get(API_VERSION, KIND, name, namespace)


__all__ = ["KustomizationReconciler", "ReconcilerOptions"]
