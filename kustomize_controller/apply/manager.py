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

Phase B — writes, in apply order one kind after the other, the objects of one kind ``concurrency`` at a
time: the cleanup JSON patch (when needed), then the real server-side apply of ``created``/``configured``
objects (ignored drifting paths stripped or adopted). ``unchanged`` objects are never written. Once a
write failed no other starts; the first failure in apply order is raised (``write.py``).

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
correction stays correct. With ``options.expected`` and ``options.owner`` too, the expected objects of
one apiVersion, kind and namespace that the memory holds a proof of are read with one metadata-only
list selected by the owner labels when they are at least ``LIST_MIN_OBJECTS`` (the proof needs only
metadata): a no-op of such a group costs one request per 500 objects. Whatever the list does not
prove — not listed (deleted, labels edited), changed, excluded — and every smaller group, a failing
list included, is read whole with its own GET, as without it.

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

The verbs live in one module each, as fluxcd/pkg ``ssa`` splits its manager: ``plan.py`` (phase A),
``write.py`` (phases A2 and B), ``wait.py`` (the waits between stages), ``options.py`` (``ApplyOptions``);
this module composes them and runs the stages.

Differences from upstream (deliberate, see docs/apply.md): upstream patches managed fields and
deletes immutable objects during phase A, concurrently with the other dry-runs; here both wait until
every dry-run of the stage passed, so a failing dry-run never leaves a half-written stage. The one
write phase A can do is the ``migrate_api_version`` managed-fields rewrite (gate MigrateAPIVersion, off
by default): it has to precede the dry-run it exists to unblock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kustomize_controller.apply.changeset import Action, ChangeSet
from kustomize_controller.apply.client import ApplyClient
from kustomize_controller.apply.errors import ApplyEngineError
from kustomize_controller.apply.objects import Object, ObjRef
from kustomize_controller.apply.options import ApplyOptions
from kustomize_controller.apply.plan import (
    NoteDeleted,
    PlannedObject,
    dry_run_error_message,
    is_immutable_error,
    make_plans,
    migrate_api_version_patch,
    strip_invalid_ca_bundle,
)
from kustomize_controller.apply.staging import partition
from kustomize_controller.apply.takeover import CONTROLLER_NAME
from kustomize_controller.apply.verified import VerifiedApplies
from kustomize_controller.apply.wait import Waiting
from kustomize_controller.apply.write import Writing
from kustomize_controller.runtime.clock import Clock


class ResourceManager(Writing, Waiting):
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
            options = replace(options, detect_only=NoteDeleted(options.detect_only, gone))
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

    async def _apply_stage(self, objects: Sequence[Object], options: ApplyOptions, so_far: ChangeSet) -> ChangeSet:
        try:
            stage_cs = await self.apply_all(objects, options)
        except ApplyEngineError as exc:
            exc.change_set = ChangeSet([*so_far.entries, *exc.change_set.entries])
            raise
        so_far.extend(stage_cs.entries)
        return stage_cs

    # --- plan only (preview) ----------------------------------------------------------------------

    async def plan_all(self, objects: Sequence[Object], options: ApplyOptions) -> list[PlannedObject]:
        """Phase A for every object, in apply order, with per-object errors (module contract)."""
        plans = make_plans(objects)
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
        plans = make_plans(objects)
        failures = await self._validate_all(plans, options, per_object_errors=False)
        if failures:
            raise failures[min(failures)]  # the first failure in apply order; nothing of the stage was written

        done = ChangeSet()
        for plan in plans:
            if plan.recreate:
                await self._recreate(plan, options, done)
        await self._write_all(plans, done)
        return ChangeSet([p.entry for p in plans if p.entry is not None])


__all__ = [
    "ApplyOptions",
    "PlannedObject",
    "ResourceManager",
    "dry_run_error_message",
    "is_immutable_error",
    "migrate_api_version_patch",
    "strip_invalid_ca_bundle",
]
