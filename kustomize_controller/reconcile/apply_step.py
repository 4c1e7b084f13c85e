"""One revision from artifact to Ready: fetch → build → apply → inventory → prune → health (§5 step 10).

Every failure sets Ready=False with its reason (and a history entry once the build digest is known)
and raises ``PipelineFailure`` carrying the message; the reconciler turns it into an event and a
``retryInterval`` requeue. A health wait interrupted by a new enqueue of the object (``ctx.interrupt``)
raises ``HealthCheckCanceledError`` instead, with no history entry, as upstream. A health wait that is
not conclusive at the first look releases the reconcile's worker (``runtime.controller.release_worker``)
and goes on without it; nothing else changes for it. Nothing is written
to the cluster before the build succeeded. Before an apply that may create objects the inventory lacks,
the old inventory plus those objects is written to the status (so that a controller killed mid-apply
still prunes them later); after a successful apply the inventory is exactly the applied set (survivors
of a failed prune are merged back); after a failed apply it is the old one plus what the partial apply
wrote and the object whose write failed unless the server refused it (``ApplyFailedError.maybe_stored``).
While the prune runs the inventory also lists the stale objects (a status written meanwhile must not
drop one not yet deleted); after a failed prune it is the new one plus the survivors.

Progress publication: a reconcile that re-verifies the revision already applied (``reverifying``:
Ready=True for the current generation and ``lastAppliedRevision`` equal to the artifact's) keeps its
progress conditions in memory and writes only the final status, which is the same document upstream
ends with (Ready=True "Applied revision", no Reconciling). A periodic no-op reconcile therefore costs
one status write instead of four or five, and Ready does not flap to Unknown every interval. As soon
as the apply changed or deleted something, progress is published again from the next step on
(health checks of a corrected drift are visible as upstream's), and so are health checks that do not
pass at the first look (a wait that may last until the timeout shows as Ready=Unknown, as upstream's
does). Failures are always written.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, NoReturn

import structlog

from kustomize_controller.api.changes import InvalidApprovalModeError, approval_mode
from kustomize_controller.api.drift import InvalidDriftModeError, drift_mode
from kustomize_controller.api.duration import format_duration, format_seconds
from kustomize_controller.api.meta import Reason
from kustomize_controller.api.source import Artifact
from kustomize_controller.apply.cel import CelStatusReaders
from kustomize_controller.apply.changeset import Action, ChangeSet, ChangeSetEntry
from kustomize_controller.apply.drift import IgnoreRuleError
from kustomize_controller.apply.errors import ApplyEngineError, HealthCheckError, PruneError
from kustomize_controller.apply.health import (
    StatusPoller,
    jobs_with_ttl,
    targets_from_change_set,
    targets_from_references,
    wait_for_set,
)
from kustomize_controller.apply.inventory import (
    extended,
    from_change_set,
    merge_survivors,
    stale_objects,
    with_objects,
)
from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
from kustomize_controller.apply.normalize import prepare_objects
from kustomize_controller.apply.objects import ObjRef, split_api_version
from kustomize_controller.apply.preview import PreviewChange
from kustomize_controller.apply.prune import StaleObject, delete_all
from kustomize_controller.apply.selectors import owner_labels
from kustomize_controller.apply.staging import staged_order
from kustomize_controller.apply.verified import VerifiedApplies
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import KubeError, NotFoundError
from kustomize_controller.kustomize.errors import ArtifactNotFoundError, KustomizeError
from kustomize_controller.kustomize.pipeline import BuildOptions, BuildPipeline, BuildResult
from kustomize_controller.kustomize.sops.identity.workload import WorkloadIdentity
from kustomize_controller.kustomize.sops.loader import load_decryptor
from kustomize_controller.reconcile import conditions
from kustomize_controller.reconcile.apply_options import ApplySettings, apply_options
from kustomize_controller.reconcile.context import HEALTHY, READY, ReconcileContext
from kustomize_controller.reconcile.drift_mode import WarnPolicy
from kustomize_controller.reconcile.drift_report import DetectOnlyDrift
from kustomize_controller.reconcile.gate.gate import (
    ChangeGate,
    GateOptions,
    GatePlanError,
    GateRecordError,
    approval_used,
    rechecking_held_plan,
    remember_ready,
)
from kustomize_controller.reconcile.history import upsert
from kustomize_controller.reconcile.preview import plan_changes
from kustomize_controller.reconcile.tenancy import TenancyOptions, TenantClientError, tenant_client
from kustomize_controller.runtime.clock import Clock
from kustomize_controller.runtime.controller import release_worker

# Reconcile logs carry the controller, name, namespace and reconcile_id bound by the runtime.
_log = structlog.get_logger()


def log_already_gone(stale: StaleObject) -> None:
    """Prune found an object of the inventory already deleted (by someone else, or never created): reported
    ``deleted`` as upstream does, and said so here."""
    _log.info("already gone", object=str(stale.ref), version=stale.version,
              detail="not found when pruned: nothing was deleted, the object leaves the inventory")


class PipelineFailure(Exception):
    def __init__(self, message: str, *, artifact_not_found: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.artifact_not_found = artifact_not_found


@dataclass(frozen=True)
class ApplyStepOptions:
    concurrent_ssa: int = 4
    no_remote_bases: bool = False
    strict_substitutions: bool = True
    fail_fast: bool = True
    group_change_log: bool = False
    engine: ApplySettings = field(default_factory=ApplySettings)  # the flags that shape every apply
    tenancy: TenancyOptions = field(default_factory=TenancyOptions)
    sops_age_secret: tuple[str, str] | None = None  # (RUNTIME_NAMESPACE, --sops-age-secret)
    # secret-less credentials of the key services (workload identity, Vault Kubernetes auth)
    workload_identity: WorkloadIdentity | None = None
    health_interval: float = 5.0
    gate: GateOptions = field(default_factory=GateOptions)  # approval and sync windows (reconcile/gate)


def reverifying(ctx: ReconcileContext) -> bool:
    """True when this reconcile re-checks the revision already applied to the current generation."""
    status = ctx.ks.status
    return (
        bool(ctx.revision)
        and status.last_applied_revision == ctx.revision
        and status.observed_generation == ctx.generation
        and conditions.is_true(status.conditions, READY)
    )


class ApplyStep:
    def __init__(self, *, client: KubeClient, pipeline: BuildPipeline, clock: Clock, options: ApplyStepOptions) -> None:
        self._client = client
        self._pipeline = pipeline
        self._clock = clock
        self._options = options
        # Objects proven in sync by a dry-run, kept across reconciles: a periodic no-op reconcile
        # then costs one GET per object instead of GET + dry-run. Any write to an object (an
        # out-of-band edit included) changes its resourceVersion, so drift is still dry-run and
        # reverted; a restart simply starts with an empty cache (apply/verified.py).
        self._verified = VerifiedApplies()
        # drift-detection: warn — the record of what was last applied per object (drift_report.py)
        self._detect_only = DetectOnlyDrift()
        # approval: manual and sync windows: between the dry-run plan and the first write (reconcile/gate)
        self._gate = ChangeGate(client=client, clock=clock, options=options.gate)

    async def run(self, ctx: ReconcileContext, *, artifact: Artifact, readers: CelStatusReaders) -> None:
        ks = ctx.ks
        try:
            drift_mode(ks.metadata.annotations)  # before anything is fetched or written
            approval_mode(ks.metadata.annotations)
        except (InvalidDriftModeError, InvalidApprovalModeError) as err:
            self._fail(ctx, Reason.RECONCILIATION_FAILED, str(err))
        timeout = format_duration(ks.get_timeout())
        remember_ready(ctx)  # a plan held by the change gate puts Ready back as it was
        ctx.hold_progress = reverifying(ctx) or rechecking_held_plan(ctx)
        ctx.mark_unknown(READY, Reason.PROGRESSING, "Reconciliation in progress")
        ctx.mark_reconciling(f"Fetching manifests for revision {ctx.revision} with a timeout of {timeout}")
        await ctx.progress()
        # the inventory is only ever replaced whole (never changed in place): the reference is the old one
        old_inventory = ks.status.inventory

        options = BuildOptions.from_kustomization(
            ks, no_remote_bases=self._options.no_remote_bases, strict_substitution=self._options.strict_substitutions
        )
        try:
            checkout_cm = self._pipeline.checkout(url=artifact.url, digest=artifact.digest, path=options.path)
            async with contextlib.AsyncExitStack() as stack:
                try:
                    checkout = await stack.enter_async_context(checkout_cm)
                except ArtifactNotFoundError as err:
                    raise PipelineFailure(str(err), artifact_not_found=True) from err
                except KustomizeError as err:
                    self._fail(ctx, err.reason, str(err))
                ks.status.last_attempted_revision = ctx.revision
                ctx.mark_reconciling(f"Building manifests for revision {ctx.revision} with a timeout of {timeout}")
                await ctx.progress()

                try:
                    client = await stack.enter_async_context(
                        tenant_client(ks, client=self._client, options=self._options.tenancy)
                    )
                except (TenantClientError, KubeError) as err:
                    # upstream: the condition says what failed, the returned error (event, log) adds where
                    self._fail(ctx, Reason.RECONCILIATION_FAILED, str(err),
                               error=f"failed to build kube client: {err}")
                result = await self._build(ctx, checkout, options)
                ctx.extra["digest"] = result.digest
                if result.reused:
                    # The build cache served the objects (same inputs, kustomize not run); the
                    # comparison with the live objects below still runs.
                    _log.info("build reused: inputs unchanged", revision=ctx.revision, digest=result.digest)
                await self._apply_and_check(ctx, client, result, old_inventory, readers)
        except OSError as err:
            self._fail(ctx, Reason.DIR_CREATION_FAILED, f"tmp dir error: {err}")

    def _fail(self, ctx: ReconcileContext, reason: str, message: str, *, error: str = "") -> NoReturn:
        """Ready=False with ``message``; the reconcile fails with ``error`` (the event's and the log's
        text), ``message`` unless given."""
        ctx.mark_false(READY, reason, message)
        raise PipelineFailure(error or message)

    def _history(self, ctx: ReconcileContext, digest: str, status: str) -> None:
        metadata = {"revision": ctx.revision}
        if ctx.origin_revision:
            metadata["originRevision"] = ctx.origin_revision
        upsert(
            ctx.ks.status.history,
            digest=digest,
            now=self._clock.now(),
            duration=ctx.elapsed(),
            status=status,
            metadata=metadata,
        )

    async def _build(self, ctx: ReconcileContext, checkout: Any, options: BuildOptions) -> BuildResult:
        ks = ctx.ks
        namespace = ks.metadata.namespace or ""
        decryptor = None
        try:
            if ks.spec.decryption is not None:
                secret_ref = ks.spec.decryption.secret_ref
                identity = self._options.workload_identity
                workload = None if identity is None else identity.for_kustomization(ks)
                decryptor = await load_decryptor(
                    client=self._client,
                    namespace=namespace,
                    secret_name=secret_ref.name if secret_ref else None,
                    global_age_secret=self._options.sops_age_secret,
                    workload=workload,
                )
            return await self._pipeline.build(
                checkout, options, decryptor=decryptor, var_source=self._var_source(namespace)
            )
        except KustomizeError as err:
            result = getattr(err, "result", None)
            if isinstance(result, BuildResult):
                self._history(ctx, result.digest, err.reason)
            self._fail(ctx, err.reason, str(err))
        except KubeError as err:
            self._fail(ctx, Reason.BUILD_FAILED, str(err))
        finally:
            # One decryptor per reconcile: it holds recovered data keys and, for OpenPGP, a private
            # temporary GNUPGHOME; both go now.
            if decryptor is not None:
                decryptor.close()
        raise AssertionError("unreachable")

    def _var_source(self, namespace: str) -> Any:
        client = self._client

        async def read(kind: str, name: str) -> dict[str, str] | None:
            import base64

            try:
                obj = await client.get("v1", kind, name, namespace)
            except NotFoundError:
                return None
            data = obj.get("data") or {}
            if kind == "Secret":
                return {k: base64.b64decode(v).decode("utf-8", "replace") for k, v in data.items()}
            return {k: str(v) for k, v in data.items()}

        return read

    def _apply_options(self, ctx: ReconcileContext, detect_only: WarnPolicy | None = None) -> ApplyOptions:
        try:
            return apply_options(ctx.ks, self._options.engine, detect_only=detect_only)
        except IgnoreRuleError as err:
            self._fail(ctx, Reason.RECONCILIATION_FAILED, str(err))

    async def _apply_and_check(
        self,
        ctx: ReconcileContext,
        client: KubeClient,
        result: BuildResult,
        old_inventory: Any,
        readers: CelStatusReaders,
    ) -> None:
        ks = ctx.ks
        timeout = format_duration(ks.get_timeout())
        name, namespace = ks.metadata.name or "", ks.metadata.namespace or ""
        objects = result.objects
        prepare_objects(objects, owner=owner_labels(name, namespace))
        ctx.mark_reconciling(f"Detecting drift for revision {ctx.revision} with a timeout of {timeout}")
        await ctx.progress()

        # The cache only serves the controller's own identity: for an impersonated tenant (or a remote
        # cluster) every dry-run also re-checks its permissions, so a revoked right still fails as upstream.
        manager = ResourceManager(
            client=client,
            clock=self._clock,
            concurrency=self._options.concurrent_ssa,
            verified=self._verified if client is self._client else None,
        )
        planned = await self._pass_gate(ctx, client, result, objects)
        change_set = ChangeSet()
        if planned is not None:
            # the gate planned and found nothing to write: its dry-run pass was this reconcile's
            change_set, drift_policy = planned
            _log.info("server-side apply skipped: the change gate's plan has nothing to write",
                      output=change_set.to_map(), revision=ctx.revision)
        else:
            drift_policy = self._detect_only.policy(ctx, digest=result.digest)
        if objects and planned is None:
            # objects new to the previous inventory are dry-run before they are read (apply/manager.py):
            # the options are taken before the inventory below lists them
            options = self._apply_options(ctx, drift_policy)
            intent = with_objects(old_inventory, objects)
            if intent is not None:
                # Recorded before the first of them can exist: a controller killed during the apply, or
                # before its final status write, would otherwise leave them in no inventory, and the next
                # revision without them would orphan them instead of pruning them (an object in the
                # inventory that was never created is simply not found by prune).
                ks.status.inventory = intent
                try:
                    await ctx.record("inventory")
                except KubeError as err:
                    # nothing was applied: it fails as an apply would (an unreachable server is retried
                    # within seconds, reconciler.py), with the old inventory
                    ks.status.inventory = old_inventory
                    self._fail(ctx, Reason.RECONCILIATION_FAILED, f"failed to record the inventory: {err}")
            try:
                change_set = await manager.apply_all_staged(objects, options)
            except ApplyEngineError as err:
                # what the partial apply wrote stays in the inventory (prunable later), and so does the
                # object whose write failed unless the server refused it: it may be stored with only the
                # answer lost (a timeout, a 5xx after the commit), and a revision without it would orphan
                # it; the rest of the objects recorded before it goes again
                handled = from_change_set(ChangeSet([*(err.change_set or ChangeSet()), *err.maybe_stored()]))
                ks.status.inventory = extended(old_inventory, handled) or old_inventory
                applied = err.change_set.changes() if err.change_set is not None else ChangeSet()
                if applied:
                    # an approval is used up by what its apply wrote; with nothing surely written its record
                    # stays "applying", and the next reconcile tells from the live objects (gate/approval.py)
                    approval_used(ctx)
                self._detect_only.remember(ctx, drift_policy, objects, written=applied.refs())
                # upstream: "%w\n%s" with one "<entry>\n" line per change of the partial apply
                message = f"{err}\n" + "".join(f"{entry}\n" for entry in applied)
                self._history(ctx, result.digest, Reason.RECONCILIATION_FAILED)
                self._fail(ctx, Reason.RECONCILIATION_FAILED, message)
            if change_set.changes():
                approval_used(ctx)
            if self._options.group_change_log:
                _log.info("server-side apply completed", output=change_set.to_grouped_map(), revision=ctx.revision)
            else:
                _log.info("server-side apply completed", output=change_set.to_map(), revision=ctx.revision)
        self._detect_only.remember(ctx, drift_policy, objects)
        await self._detect_only.report(ctx, drift_policy)
        changes = str(change_set.changes())
        drifted = bool(changes)
        if changes:
            ctx.hold_progress = False
            await ctx.event(changes)

        new_inventory = from_change_set(change_set)
        ks.status.inventory = new_inventory
        stale = stale_objects(old_inventory, new_inventory)
        if ks.spec.prune and stale:
            # Until the prune ends, the stale objects stay listed: a status written meanwhile (the progress
            # timer's) must not drop them, or a prune that then fails, with its final status write failing
            # too (a dying controller, a restarting API server), leaves them in no inventory, for ever.
            ks.status.inventory = merge_survivors(new_inventory, stale, ChangeSet())
            try:
                pruned = await delete_all(client, stale, owner=owner_labels(name, namespace),
                                          already_gone=log_already_gone)
            except PruneError as err:
                ks.status.inventory = merge_survivors(new_inventory, stale, err.change_set or ChangeSet())
                if (err.change_set or ChangeSet()).changes():
                    approval_used(ctx)
                self._history(ctx, result.digest, Reason.PRUNE_FAILED)
                self._fail(ctx, Reason.PRUNE_FAILED, str(err))
            ks.status.inventory = new_inventory
            if pruned:
                ctx.hold_progress = False
                _log.info(f"garbage collection completed: {pruned}")
                await ctx.event(str(pruned))
        approval_used(ctx)  # the approved plan was applied (whatever of it the cluster already held)

        is_new_revision = ks.status.last_applied_revision != ctx.revision
        await self._health(ctx, client, change_set, objects, readers, is_new_revision=is_new_revision, drifted=drifted)

        ks.status.last_applied_revision = ctx.revision
        ks.status.last_applied_origin_revision = ctx.origin_revision or None
        ctx.mark_true(READY, Reason.RECONCILIATION_SUCCEEDED, f"Applied revision: {ctx.revision}")
        self._history(ctx, result.digest, Reason.RECONCILIATION_SUCCEEDED)

    async def _pass_gate(
        self, ctx: ReconcileContext, client: KubeClient, result: BuildResult, objects: list[dict[str, Any]]
    ) -> tuple[ChangeSet, WarnPolicy | None] | None:
        """The change gate (reconcile/gate/gate.py): returns to apply, raises ``GateHeld`` to hold.

        When the gate planned and the plan writes nothing, returns what the apply would have found — every
        object unchanged or skipped, in the apply's order — and the plan's drift policy, so that the
        objects are not read a second time; otherwise None (the apply runs)."""
        planned: list[tuple[list[PreviewChange], WarnPolicy | None]] = []

        async def plan() -> tuple[list[PreviewChange], list[str]]:
            # the apply's own options (warn mode: a policy of its own, drift it would keep is no change)
            policy = self._detect_only.policy(ctx, digest=result.digest)
            changes, errors = await plan_changes(
                client=client, clock=self._clock, ks=ctx.ks, objects=objects,
                options=self._apply_options(ctx, policy), concurrency=self._options.concurrent_ssa,
                verified=self._verified if client is self._client else None,
            )
            planned.append((changes, policy))
            return changes, errors

        try:
            await self._gate.check(ctx, plan=plan)
        except (GatePlanError, GateRecordError) as err:
            self._fail(ctx, Reason.RECONCILIATION_FAILED, str(err))
        if not planned or any(c.changed for c in planned[0][0]):
            return None
        changes, policy = planned[0]
        by_ref = {c.ref: c for c in changes}
        entries = [ChangeSetEntry(ref=ref, version=split_api_version(by_ref[ref].api_version)[1],
                                  action=Action(by_ref[ref].action))
                   for ref in staged_order(objects, self._options.engine.custom_stage_kinds) if ref in by_ref]
        return ChangeSet(entries), policy

    async def _health(
        self,
        ctx: ReconcileContext,
        client: KubeClient,
        change_set: ChangeSet,
        objects: list[dict[str, Any]],
        readers: CelStatusReaders,
        *,
        is_new_revision: bool,
        drifted: bool,
    ) -> None:
        ks = ctx.ks
        if not ks.spec.health_checks and not ks.spec.wait:
            conditions.delete(ks.status.conditions, HEALTHY)
            return
        self_ref = ObjRef(group="kustomize.toolkit.fluxcd.io", kind="Kustomization",
                          namespace=ks.metadata.namespace or "", name=ks.metadata.name or "")
        if ks.spec.wait:
            applied = ChangeSet([e for e in change_set if e.action is not Action.SKIPPED])
            candidates = len(targets_from_change_set(applied))
            targets = targets_from_change_set(applied, exclude=self_ref)
        else:
            candidates = len(targets_from_references(ks.spec.health_checks))
            targets = targets_from_references(ks.spec.health_checks, exclude=self_ref)
        if not candidates:
            # as upstream, emptiness is judged before dropping the Kustomization itself: a check that
            # names only itself still runs (trivially) and reports Healthy
            conditions.delete(ks.status.conditions, HEALTHY)
            return
        was_healthy = conditions.is_true(ks.status.conditions, HEALTHY)
        timeout = ks.get_timeout()
        message = f"Running health checks for revision {ctx.revision} with a timeout of {format_duration(timeout)}"
        ctx.mark_reconciling(message)
        ctx.mark_unknown(HEALTHY, Reason.PROGRESSING, message)
        await ctx.progress()

        async def publish_wait() -> None:
            # Not all healthy at the first look: what is left is waiting, which needs no worker. The
            # controller lets this reconcile run on without one (bounded by --concurrent-health-checks;
            # a no-op under HoldWorkerDuringHealthChecks); its key stays busy until the wait ends.
            release_worker()
            # a re-verification whose objects are not all healthy at the first look: show the wait
            if ctx.hold_progress:
                ctx.hold_progress = False
                await ctx.progress()

        started = self._clock.monotonic()
        poller = StatusPoller(client=client, clock=self._clock, readers=readers)
        waiting = wait_for_set(
            targets,
            poller=poller,
            clock=self._clock,
            timeout_seconds=timeout.total_seconds(),
            interval=self._options.health_interval,
            fail_fast=self._options.fail_fast,
            jobs_with_ttl=jobs_with_ttl(objects),
            on_waiting=publish_wait,
        )
        try:
            if ctx.interrupt is None:
                await waiting
            else:
                await ctx.interrupt.race(waiting)  # HealthCheckCanceledError goes to the reconciler
        except HealthCheckError as err:
            took = format_seconds(self._clock.monotonic() - started)
            ctx.mark_false(HEALTHY, Reason.HEALTH_CHECK_FAILED, str(err))
            self._history(ctx, self._current_digest(ctx), Reason.HEALTH_CHECK_FAILED)
            self._fail(ctx, Reason.HEALTH_CHECK_FAILED, f"health check failed after {took}: {err}")
        took = format_seconds(self._clock.monotonic() - started)
        passed = f"Health check passed in {took}"
        if not was_healthy or (is_new_revision and drifted):
            await ctx.event(passed)
        ctx.mark_true(HEALTHY, Reason.SUCCEEDED, passed)
        await ctx.progress()

    def _current_digest(self, ctx: ReconcileContext) -> str:
        return str(ctx.extra.get("digest", ""))
