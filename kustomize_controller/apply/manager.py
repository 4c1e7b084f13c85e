"""The staged server-side apply engine (fluxcd/pkg ``ssa`` ``ApplyAllStaged``/``ApplyAll``).

``ResourceManager.apply_all_staged(objects, options)`` applies the stages of ``staging`` in order and
waits (``options.wait_interval``/``wait_timeout``: 2 s / 60 s) for the definitions and classes stages to
be Current before the next one starts; the kinds of CRDs that stage created or changed must then also
be known to discovery (a real kube-apiserver publishes them a moment after ``Established``; polled at
most until the wait timeout, after which the next stage reports what is missing). Inside a stage
(``apply_all``):

Phase A — validation, concurrently (at most ``concurrency`` objects in flight), **reads and dry-runs
only**: GET the live object (an error answer reads as absent, as upstream: the dry-run decides, so a
tenant that may patch but not read still applies, and one that may do neither gets the dry-run's
``Forbidden``; only a request that got no answer fails as ``query failed``); skip rules (exclusion on
desired or live, if-not-present when live exists) → ``skipped``; server-side dry-run apply (field
manager, force); compute the metadata-cleanup patch (``takeover``) and the drift (``drift``); plan
``created``/``configured``/``unchanged``.
A dry-run that fails with an immutable-field error on an existing object, with ``force`` or the
force selector, is planned as a recreate instead of failing.
If any object of the stage failed, the stage raises (the first failure in apply order) and **nothing of
the stage has been written**; the objects after a failure in apply order are cancelled (no request of
theirs is left in flight or sent), those before it still finish so that the error is deterministic.

Phase A2 — recreates, one by one: DELETE (background), poll until gone, dry-run again.

Phase B — writes, sequentially in apply order: the cleanup JSON patch (when needed), then the real
server-side apply of ``created``/``configured`` objects (ignored drifting paths stripped or adopted).
``unchanged`` objects are never written.

Detect-only drift (``options.detect_only``, see ``detect_only.py``): an object that phase A would
write — configured, recreated for an immutable field, or created although it was applied before
(deleted out of band) — but whose desired state the policy reports unchanged since it was last
applied is left as it is: planned ``unchanged`` (``skipped`` when it no longer exists), no cleanup
patch, no apply, no delete, and reported to the policy with its drifted paths. Such an object is never
remembered as verified, so every reconcile dry-runs it again and the drift stays visible.

With a ``VerifiedApplies`` (``verified=``, kept by the caller across reconciles), phase A skips the
dry-run of an object whose live ``uid``/``resourceVersion`` and desired manifest are the same as at the
last dry-run that proved it unchanged, and plans it ``unchanged``: a no-op costs one GET per object.
Without it (the default) every object is dry-run, as upstream. See ``verified.py`` for why drift
correction stays correct.

``plan_all(objects, options)`` runs the same phase A (one function, ``_validate_all``) for every object
and returns what would happen (``PlannedObject``: action, live object, dry-run result, recreate, the
error of that object — an object's own error does not stop the others;
any other exception does, cancelling the objects after it, and is raised): the
preview behind ``kustomize-controller diff`` (``preview.py``). It never writes as long as
``options.migrate_api_version`` is off; the preview keeps the option, as the apply has it, and wraps the
client so that the managed-fields rewrite is a dry-run too.

Every failure raises an ``ApplyEngineError`` subclass whose ``change_set`` holds what was done before
it (previous stages, and the objects of this stage already written). The apply that failed in phase B
(``ApplyFailedError``) also names its object (``entry``) and whether the server refused it (a 4xx:
nothing stored) or the write may have been stored with its answer lost (``maybe_stored()``: a timeout, a
cut connection, a 5xx after the commit); the caller keeps such an object in its inventory.
Other writes: a failed cleanup patch or recreate DELETE leaves no new object behind. Messages are upstream's:
``<Kind/ns/name> dry-run failed (<Reason>): <msg>``, ``<Kind/ns/name> apply failed: <msg>``.

Differences from upstream (deliberate, see docs/apply.md): upstream patches managed fields and
deletes immutable objects during phase A, concurrently with the other dry-runs; here both wait until
every dry-run of the stage passed, so a failing dry-run never leaves a half-written stage. The one
write phase A can do is the ``migrate_api_version`` managed-fields rewrite (gate MigrateAPIVersion, off
by default): it has to precede the dry-run it exists to unblock.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kustomize_controller.apply.changeset import Action, ChangeSet, ChangeSetEntry
from kustomize_controller.apply.client import ApplyClient
from kustomize_controller.apply.detect_only import DriftPolicy, HeldDrift, drifted_paths
from kustomize_controller.apply.drift import (
    DriftResolution,
    IgnoreRule,
    apply_resolutions,
    has_drifted,
    resolve_ignored_drift,
)
from kustomize_controller.apply.errors import (
    ApplyEngineError,
    ApplyFailedError,
    ApplyStepError,
    DryRunError,
    HealthCheckError,
)
from kustomize_controller.apply.health import HealthTarget, StatusPoller, wait_for_set
from kustomize_controller.apply.objects import Object, ObjRef, deep_copy, metadata, resource_version
from kustomize_controller.apply.selectors import (
    EXCLUSION_SELECTOR,
    FORCE_SELECTOR,
    IF_NOT_PRESENT_SELECTOR,
    Selector,
    any_in_metadata,
)
from kustomize_controller.apply.staging import GroupKind, is_crd, partition, sort_objects
from kustomize_controller.apply.takeover import CONTROLLER_NAME, CleanupOptions, JsonPatch, cleanup_patch
from kustomize_controller.apply.verified import VerifiedApplies, fingerprint
from kustomize_controller.kube.discovery import NoKindMatchError
from kustomize_controller.kube.errors import ApiError, KubeError, NotFoundError
from kustomize_controller.runtime.clock import Clock

_IMMUTABLE_MESSAGE = re.compile(r"is\simmutable|immutable\sfield")


@dataclass(frozen=True)
class ApplyOptions:
    force: bool = False
    exclusion_selector: Selector = field(default_factory=lambda: dict(EXCLUSION_SELECTOR))
    if_not_present_selector: Selector = field(default_factory=lambda: dict(IF_NOT_PRESENT_SELECTOR))
    force_selector: Selector = field(default_factory=lambda: dict(FORCE_SELECTOR))
    cleanup: CleanupOptions | None = field(default_factory=CleanupOptions)
    custom_stage_kinds: frozenset[GroupKind] = frozenset()
    ignore_rules: tuple[IgnoreRule, ...] = ()
    wait_interval: float = 2.0
    wait_timeout: float = 60.0
    migrate_api_version: bool = False  # feature gate MigrateAPIVersion (writes in phase A, see docs)
    detect_only: DriftPolicy | None = None  # drift-detection: warn (module contract)
    # Objects expected to exist (the previous inventory). ``None``: GET every object first, as upstream.
    # Otherwise an object not in it is dry-run first, and read only if the dry-run shows it exists.
    expected: frozenset[ObjRef] | None = None


def is_immutable_error(err: BaseException) -> bool:
    """Upstream ``IsImmutableError``: reason Conflict or Invalid, or an "immutable" message."""
    if isinstance(err, ApiError) and err.reason in ("Conflict", "Invalid"):
        return True
    text = err.message if isinstance(err, ApiError) else str(err)
    return bool(_IMMUTABLE_MESSAGE.search(text))


def _error_text(err: BaseException) -> str:
    return err.message if isinstance(err, ApiError) else str(err)


def dry_run_error_message(ref: ObjRef, err: BaseException) -> str:
    """``<ref> dry-run failed (<Reason>): <msg>`` with upstream's NotFound and conflict variants."""
    msg = _error_text(err)
    if isinstance(err, NotFoundError):
        if not ref.namespace:
            return f"{ref} namespace not specified: {msg}"
        return f"{ref} not found: {msg}"
    # client-go's ReasonForError: the Status's own reason (a 500 Status may carry none: no parentheses)
    reason = err.status_reason if isinstance(err, ApiError) else ""
    if isinstance(err, ApiError) and any(c.get("reason") == "FieldManagerConflict" for c in err.causes):
        reason = "FieldManagerConflict"
    return f"{ref} dry-run failed{f' ({reason})' if reason else ''}: {msg}"


def _missing_namespace_message(ref: ObjRef, err: ValueError) -> str:
    # The client refuses to build a request for a namespaced kind without namespace; upstream sends
    # it and gets a 404, reported as "namespace not specified".
    if not ref.namespace:
        return f"{ref} namespace not specified: the server could not find the requested resource"
    return f"{ref} dry-run failed: {err}"


def strip_invalid_ca_bundle(obj: Object) -> None:
    """Remove a CRD conversion webhook ``caBundle`` that is not base64 PEM (rejected since k8s 1.31)."""
    if not is_crd(obj):
        return
    client_config = (((obj.get("spec") or {}).get("conversion") or {}).get("webhook") or {}).get("clientConfig")
    if not isinstance(client_config, dict):
        return
    bundle = client_config.get("caBundle")
    if not isinstance(bundle, str) or not bundle:
        return
    try:
        decoded = base64.b64decode(bundle, validate=True)
    except (binascii.Error, ValueError):
        del client_config["caBundle"]
        return
    if decoded and b"-----BEGIN CERTIFICATE-----" not in decoded:
        del client_config["caBundle"]


def migrate_api_version_patch(live: Object, api_version: str) -> JsonPatch:
    """Rewrite every managed-fields entry to ``api_version`` (upstream ``PatchMigrateToVersion``)."""
    entries = [e for e in metadata(live).get("managedFields") or [] if isinstance(e, dict)]
    if not entries or all(e.get("apiVersion") == api_version for e in entries):
        return []
    migrated = [{**e, "apiVersion": api_version} for e in entries]
    return [{"op": "replace", "path": "/metadata/managedFields", "value": migrated}]


@dataclass
class _Plan:
    desired: Object
    ref: ObjRef
    entry: ChangeSetEntry | None = None
    live: Object | None = None
    write: bool = False
    recreate: bool = False
    cleanup: JsonPatch = field(default_factory=list)
    migrated: bool = False
    resolutions: list[DriftResolution] = field(default_factory=list)
    fingerprint: str = ""
    held: HeldDrift | None = None
    dry_run: Object | None = None


@dataclass(frozen=True)
class PlannedObject:
    """What phase A found for one object (``ResourceManager.plan_all``)."""

    ref: ObjRef
    desired: Object
    action: Action  # created, configured, unchanged or skipped (UNKNOWN with an error)
    live: Object | None = None
    dry_run: Object | None = None
    recreate: bool = False  # configured by deleting and re-creating it (immutable field, force)
    error: ApplyEngineError | None = None


def _plans(objects: Sequence[Object]) -> list[_Plan]:
    """One plan per object, on copies, in apply order."""
    return [_Plan(desired=o, ref=ObjRef.from_object(o)) for o in sort_objects(deep_copy(o) for o in objects)]


class _NoteDeleted:
    """A ``DriftPolicy`` proxy noting the objects left deleted, which the stage wait must skip."""

    def __init__(self, policy: DriftPolicy, gone: set[ObjRef]) -> None:
        self._policy = policy
        self._gone = gone

    def unchanged(self, ref: ObjRef, desired: Object, *, live: Object | None, dry_run: Object | None) -> bool:
        return self._policy.unchanged(ref, desired, live=live, dry_run=dry_run)

    def held(self, drift: HeldDrift) -> None:
        if drift.deleted:
            self._gone.add(drift.ref)
        self._policy.held(drift)


class ResourceManager:
    """Applies, diffs and waits for objects through an ``ApplyClient`` (module contract)."""

    def __init__(
        self,
        *,
        client: ApplyClient,
        clock: Clock,
        field_manager: str = CONTROLLER_NAME,
        concurrency: int = 4,
        verified: VerifiedApplies | None = None,
    ) -> None:
        self.client = client
        self.clock = clock
        self.field_manager = field_manager
        self.concurrency = max(1, concurrency)
        # objects proven in sync (see verified.py); None: dry-run every object every time, as upstream
        self.verified = verified

    # --- staged ---------------------------------------------------------------------------------

    async def apply_all_staged(self, objects: Sequence[Object], options: ApplyOptions) -> ChangeSet:
        stages = partition(objects, options.custom_stage_kinds)
        change_set = ChangeSet()
        gone: set[ObjRef] = set()  # deleted out of band and left so (detect-only): nothing to wait for
        if options.detect_only is not None:
            options = replace(options, detect_only=_NoteDeleted(options.detect_only, gone))
        for stage_objects, wait in (
            (stages.definitions, True),
            (stages.classes, True),
            (stages.custom, False),
        ):
            if not stage_objects:
                continue
            stage_cs = await self._apply_stage(stage_objects, options, change_set)
            if wait:
                await self._wait_stage(ChangeSet([e for e in stage_cs if e.ref not in gone]), options, change_set)
                await self._wait_served(stage_objects, stage_cs, options)
        await self._apply_stage(stages.rest, options, change_set)
        return change_set

    async def _wait_served(self, objects: Sequence[Object], stage_cs: ChangeSet, options: ApplyOptions) -> None:
        """Until discovery resolves the kinds of the CRDs this stage created or changed (module contract)."""
        touched = {e.ref for e in stage_cs if e.action in (Action.CREATED, Action.CONFIGURED)}
        kinds = [k for o in objects if is_crd(o) and ObjRef.from_object(o) in touched for k in _served_kinds(o)]
        deadline = self.clock.monotonic() + options.wait_timeout
        for api_version, kind, namespaced in kinds:
            while True:
                try:
                    # any answer but "no such kind" (NotFound, Forbidden...) means the kind is mapped
                    await self.client.get(api_version, kind, "kustomize-controller-probe",
                                          "default" if namespaced else None)
                except NoKindMatchError:
                    if self.clock.monotonic() >= deadline:
                        return
                    await self.clock.sleep(min(options.wait_interval, 0.5))
                    continue
                except (KubeError, ValueError):
                    pass
                break

    async def _apply_stage(self, objects: Sequence[Object], options: ApplyOptions, so_far: ChangeSet) -> ChangeSet:
        try:
            stage_cs = await self.apply_all(objects, options)
        except ApplyEngineError as exc:
            exc.change_set = ChangeSet([*so_far.entries, *exc.change_set.entries])
            raise
        so_far.extend(stage_cs.entries)
        return stage_cs

    async def _wait_stage(self, stage_cs: ChangeSet, options: ApplyOptions, so_far: ChangeSet) -> None:
        targets = [HealthTarget.of(e.ref, e.version) for e in stage_cs]
        poller = StatusPoller(client=self.client, clock=self.clock)
        try:
            await wait_for_set(
                targets,
                poller=poller,
                clock=self.clock,
                timeout_seconds=options.wait_timeout,
                interval=options.wait_interval,
            )
        except HealthCheckError as exc:
            raise ApplyStepError(exc.message, change_set=ChangeSet(list(so_far.entries))) from exc

    # --- plan only (preview) ----------------------------------------------------------------------

    async def plan_all(self, objects: Sequence[Object], options: ApplyOptions) -> list[PlannedObject]:
        """Phase A for every object, in apply order, with per-object errors (module contract)."""
        plans = _plans(objects)
        failures = await self._validate_all(plans, options, per_object_errors=True)
        unexpected = [i for i, exc in failures.items() if not isinstance(exc, ApplyEngineError)]
        if unexpected:
            raise failures[min(unexpected)]
        out: list[PlannedObject] = []
        for index, plan in enumerate(plans):
            action = plan.entry.action if plan.entry is not None else Action.UNKNOWN
            if plan.recreate:
                action = Action.CONFIGURED
            error = failures.get(index)
            out.append(PlannedObject(ref=plan.ref, desired=plan.desired, action=action, live=plan.live,
                                     dry_run=plan.dry_run, recreate=plan.recreate,
                                     error=error if isinstance(error, ApplyEngineError) else None))
        return out

    # --- one stage ------------------------------------------------------------------------------

    async def apply_all(self, objects: Sequence[Object], options: ApplyOptions) -> ChangeSet:
        """Apply one stage (no waiting); see the module contract for the phases."""
        plans = _plans(objects)
        failures = await self._validate_all(plans, options, per_object_errors=False)
        if failures:
            raise failures[min(failures)]  # the first failure in apply order; nothing of the stage was written

        done = ChangeSet()
        for plan in plans:
            if plan.recreate:
                await self._recreate(plan, options, done)
        for plan in plans:
            if plan.write:
                await self._write(plan, done)
        return ChangeSet([p.entry for p in plans if p.entry is not None])

    async def _validate_all(
        self, plans: Sequence[_Plan], options: ApplyOptions, *, per_object_errors: bool
    ) -> dict[int, Exception]:
        """Phase A for ``plans``: the failures by index (module contract, "Phase A").

        At most ``concurrency`` objects in flight, all in one task group: nothing is left running when
        this returns or raises. A failure that ends the phase (any failure of an apply; in a plan,
        ``per_object_errors``, only one that is not the object's own ``ApplyEngineError``, which is that
        object's result) cancels the objects after it in apply order: their requests in flight are
        cancelled and the queued ones never start. Those before it run on, so the failure that counts
        is still the first in apply order, as if every object had been validated."""
        context = self._fingerprint_context(options)
        gate = asyncio.Semaphore(self.concurrency)
        failures: dict[int, Exception] = {}
        tasks: list[asyncio.Task[None]] = []

        async def validate(index: int, plan: _Plan) -> None:
            async with gate:
                try:
                    await self._validate(plan, options, context)
                except Exception as exc:
                    failures[index] = exc
                    if not (per_object_errors and isinstance(exc, ApplyEngineError)):
                        for later in tasks[index + 1:]:
                            later.cancel()

        async with asyncio.TaskGroup() as group:
            tasks.extend(group.create_task(validate(i, p)) for i, p in enumerate(plans))
        return failures

    async def _get_live(self, ref: ObjRef, api_version: str) -> Object | None:
        try:
            return await self.client.get(api_version, ref.kind, ref.name, ref.namespace or None)
        except (NotFoundError, NoKindMatchError):
            return None
        except ValueError:
            return None  # a namespaced kind without namespace: the dry-run reports it
        except ApiError:
            # any other answer (a tenant allowed to patch but not to read, a 500): read as absent, and the
            # dry-run decides, as upstream's ApplyAll ignores the GET's error ("dry-run failed (Forbidden)")
            return None
        except KubeError as exc:
            # no answer at all: the dry-run would meet the same; one request, and the quick retries
            raise ApplyStepError(f"{ref} query failed: {_error_text(exc)}") from exc

    async def _dry_run(self, obj: Object) -> Object:
        return await self.client.apply(obj, field_manager=self.field_manager, force=True, dry_run=True)

    def _fingerprint_context(self, options: ApplyOptions) -> str:
        """Everything besides the manifest that shapes an unchanged plan (see verified.py)."""
        if self.verified is None:
            return ""
        return f"{self.field_manager}|{options.cleanup!r}|{options.ignore_rules!r}|{options.migrate_api_version}"

    def _probe_first(self, plan: _Plan, options: ApplyOptions) -> bool:
        """Whether to dry-run before reading: an object new to the inventory most likely does not exist,
        and a dry-run create says so (an empty resourceVersion) — its GET would only answer 404."""
        if options.expected is None or plan.ref in options.expected or options.migrate_api_version:
            return False
        desired = plan.desired
        return not (
            any_in_metadata(desired, options.exclusion_selector)
            or any_in_metadata(desired, options.if_not_present_selector)
        )

    async def _validate(self, plan: _Plan, options: ApplyOptions, context: str = "") -> None:
        desired = plan.desired
        strip_invalid_ca_bundle(desired)
        if self.verified is not None:
            plan.fingerprint = fingerprint(desired, context=context)
        probed: Object | None = None
        if self._probe_first(plan, options):
            try:
                probed = await self._dry_run(desired)
            except (KubeError, ValueError):
                probed = None  # read first and dry-run again: the errors need the live object
            if probed is not None and not resource_version(probed):
                self._plan_from_dry_run(plan, probed, options)  # absent: created, nothing to read
                return
        live = await self._get_live(plan.ref, str(desired.get("apiVersion") or ""))
        plan.live = live
        if any_in_metadata(desired, options.exclusion_selector) or any_in_metadata(live, options.exclusion_selector):
            plan.entry = ChangeSetEntry.for_object(live if live else desired, Action.SKIPPED)
            return
        if live is not None and any_in_metadata(desired, options.if_not_present_selector):
            plan.entry = ChangeSetEntry.for_object(live, Action.SKIPPED)
            return
        verified = self.verified
        if verified is not None and live is not None and verified.is_verified(plan.ref, plan.fingerprint, live):
            plan.entry = ChangeSetEntry.for_object(live, Action.UNCHANGED)
            return
        if options.migrate_api_version and live is not None:
            await self._migrate_api_version(plan, live)
        try:
            # a dry-run made before the read still holds: drift is what it would change in ``live``
            dry_run = probed if probed is not None and live is not None else await self._dry_run(desired)
        except ValueError as exc:
            raise DryRunError(_missing_namespace_message(plan.ref, exc)) from exc
        except KubeError as exc:
            # deleted out of band together with its Namespace or CRD: drift, like the object alone
            if live is None and isinstance(exc, (NotFoundError, NoKindMatchError)) and self._hold_drift(
                plan, options, dry_run=None
            ):
                return
            if live is not None and is_immutable_error(exc) and self._should_force(desired, live, options):
                if self._hold_drift(plan, options, dry_run=None):
                    return
                plan.recreate = True
                plan.write = True
                plan.entry = ChangeSetEntry.for_object(desired, Action.CREATED)
                return
            raise DryRunError(dry_run_error_message(plan.ref, exc)) from exc
        self._plan_from_dry_run(plan, dry_run, options)
        if verified is not None and plan.fingerprint:
            if plan.write or plan.held is not None:
                verified.forget(plan.ref)
            else:
                verified.remember(plan.ref, plan.fingerprint, plan.live)

    async def _migrate_api_version(self, plan: _Plan, live: Object) -> None:
        api_version = str(plan.desired.get("apiVersion") or "")
        patch = migrate_api_version_patch(live, api_version)
        if not patch:
            return
        ref = ObjRef.from_object(live)
        try:
            plan.live = await self.client.patch(
                str(live.get("apiVersion") or api_version),
                ref.kind,
                ref.name,
                ref.namespace or None,
                patch,
                patch_type="json",
                field_manager=self.field_manager,
            )
        except KubeError as exc:
            raise ApplyStepError(
                f"{ref} failed to migrate API version: failed to migrate managed fields API version "
                f"to {api_version}: {_error_text(exc)}"
            ) from exc
        plan.migrated = True

    def _should_force(self, desired: Object, live: Object, options: ApplyOptions) -> bool:
        return (
            options.force
            or any_in_metadata(desired, options.force_selector)
            or any_in_metadata(live, options.force_selector)
        )

    def _plan_from_dry_run(self, plan: _Plan, dry_run: Object, options: ApplyOptions) -> None:
        live = plan.live
        plan.dry_run = dry_run
        if options.cleanup is not None:
            plan.cleanup = cleanup_patch(plan.desired, live, options.cleanup, manager=self.field_manager)
        drifted = has_drifted(live, dry_run, options.ignore_rules)
        source = dry_run if metadata(dry_run).get("name") else plan.desired
        if not drifted and not plan.cleanup and not plan.migrated:
            plan.entry = ChangeSetEntry.for_object(source, Action.UNCHANGED)
            return
        if drifted and not plan.migrated and not plan.recreate and self._hold_drift(plan, options, dry_run):
            return
        plan.write = True
        if live is not None and resource_version(dry_run) and options.ignore_rules:
            plan.resolutions = resolve_ignored_drift(
                live, dry_run, options.ignore_rules, field_manager=self.field_manager
            )
        action = Action.CONFIGURED if resource_version(dry_run) else Action.CREATED
        plan.entry = ChangeSetEntry.for_object(source, action)

    def _hold_drift(self, plan: _Plan, options: ApplyOptions, dry_run: Object | None) -> bool:
        """Detect-only mode: leave a drifted object unwritten when its desired state is unchanged.

        ``plan.live`` None: deleted out of band (planned ``skipped``: not re-created, not health-checked);
        ``dry_run`` None: it would need a delete and re-create."""
        policy, live = options.detect_only, plan.live
        if policy is None or not policy.unchanged(plan.ref, plan.desired, live=live, dry_run=dry_run):
            return False
        if live is None:
            if any_in_metadata(plan.desired, options.if_not_present_selector):
                return False  # "create when missing" is the user's standing instruction for it
            entry = ChangeSetEntry.for_object(plan.desired, Action.SKIPPED)
            plan.held = HeldDrift(ref=plan.ref, version=entry.version, paths=(), deleted=True)
        else:
            paths = tuple(drifted_paths(live, dry_run, options.ignore_rules)) if dry_run is not None else ()
            source = dry_run if dry_run is not None and metadata(dry_run).get("name") else plan.desired
            entry = ChangeSetEntry.for_object(source, Action.UNCHANGED)
            plan.held = HeldDrift(ref=plan.ref, version=entry.version, paths=paths, recreate=dry_run is None)
        plan.entry = entry
        plan.write = plan.recreate = False
        plan.cleanup = []
        plan.resolutions = []
        policy.held(plan.held)
        return True

    async def _recreate(self, plan: _Plan, options: ApplyOptions, done: ChangeSet) -> None:
        ref, desired = plan.ref, plan.desired
        api_version = str(desired.get("apiVersion") or "")
        try:
            await self.client.delete(
                api_version, ref.kind, ref.name, ref.namespace or None, propagation_policy="Background"
            )
        except NotFoundError:
            pass
        except KubeError as exc:
            raise ApplyStepError(
                f"{ref} immutable field detected, failed to delete object: {_error_text(exc)}",
                change_set=ChangeSet(list(done.entries)),
            ) from exc
        deadline = self.clock.monotonic() + options.wait_timeout
        while await self._get_live(ref, api_version) is not None:
            if self.clock.monotonic() >= deadline:
                raise ApplyStepError(
                    f"{ref} immutable field detected, failed to wait for object to be deleted: "
                    f"timeout after {options.wait_timeout:g}s",
                    change_set=ChangeSet(list(done.entries)),
                )
            await self.clock.sleep(options.wait_interval)
        plan.live = None
        try:
            dry_run = await self._dry_run(desired)
        except KubeError as exc:
            raise DryRunError(dry_run_error_message(ref, exc), change_set=ChangeSet(list(done.entries))) from exc
        self._plan_from_dry_run(plan, dry_run, options)

    async def _write(self, plan: _Plan, done: ChangeSet) -> None:
        ref = plan.ref
        if plan.cleanup and plan.live is not None:
            live_ref = ObjRef.from_object(plan.live)
            try:
                await self.client.patch(
                    str(plan.live.get("apiVersion") or plan.desired.get("apiVersion") or ""),
                    live_ref.kind,
                    live_ref.name,
                    live_ref.namespace or None,
                    plan.cleanup,
                    patch_type="json",
                    field_manager=self.field_manager,
                )
            except KubeError as exc:
                raise ApplyStepError(
                    f"{live_ref} metadata.managedFields cleanup failed: {_error_text(exc)}",
                    change_set=ChangeSet(list(done.entries)),
                ) from exc
        payload: dict[str, Any] = deep_copy(plan.desired)
        if plan.resolutions:
            apply_resolutions(payload, plan.resolutions)
        try:
            applied = await self.client.apply(payload, field_manager=self.field_manager, force=True)
        except KubeError as exc:
            # a 4xx is the server's refusal (nothing stored); any other failure may follow the commit
            raise ApplyFailedError(
                f"{ref} apply failed: {_error_text(exc)}", change_set=ChangeSet(list(done.entries)),
                entry=plan.entry or ChangeSetEntry.for_object(plan.desired, Action.UNKNOWN),
                refused=isinstance(exc, ApiError) and 400 <= exc.status < 500,
            ) from exc
        if self.verified is not None and plan.fingerprint and not plan.resolutions:
            # the answer is the object as this apply of the desired manifest left it: the next dry-run
            # of the same manifest would find it unchanged (verified.py), so it is not paid for
            self.verified.remember(ref, plan.fingerprint, applied)
        if plan.entry is not None:
            done.add(plan.entry)


def _served_kinds(crd: Object) -> list[tuple[str, str, bool]]:
    """(apiVersion, kind, namespaced) of every served version of a CRD manifest."""
    spec = crd.get("spec") or {}
    group, kind = str(spec.get("group") or ""), str((spec.get("names") or {}).get("kind") or "")
    if not group or not kind:
        return []
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    return [(f"{group}/{v['name']}", kind, namespaced) for v in spec.get("versions") or []
            if isinstance(v, dict) and v.get("name") and v.get("served", True)]
