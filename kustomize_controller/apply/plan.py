"""Phase A of a stage — reads and dry-runs only: what to do with each object (``manager.py``'s contract).

``Planning._validate_all`` plans every object of a stage, ``concurrency`` at a time, and returns the
failures by index; ``_validate`` plans one (read, skip rules, verified memory, dry-run, recreate
decision, cleanup patch, drift, detect-only hold). ``Engine`` holds what every verb shares: the client,
the clock, the field manager, the concurrency and the verified-applies memory, and the two requests
both phases make (read the live object, dry-run the desired one).

The error texts are upstream's: ``<Kind/ns/name> dry-run failed (<Reason>): <msg>`` with its
``not found`` / ``namespace not specified`` variants and reason ``FieldManagerConflict``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from kustomize_controller.apply.changeset import Action, ChangeSetEntry
from kustomize_controller.apply.client import ApplyClient
from kustomize_controller.apply.detect_only import DriftPolicy, HeldDrift, drifted_paths
from kustomize_controller.apply.drift import DriftResolution, has_drifted, resolve_ignored_drift
from kustomize_controller.apply.errors import ApplyEngineError, ApplyStepError, DryRunError
from kustomize_controller.apply.objects import Object, ObjRef, deep_copy, metadata, resource_version
from kustomize_controller.apply.options import ApplyOptions
from kustomize_controller.apply.selectors import any_in_metadata
from kustomize_controller.apply.staging import is_crd, sort_objects
from kustomize_controller.apply.takeover import JsonPatch, cleanup_patch
from kustomize_controller.apply.verified import VerifiedApplies, fingerprint
from kustomize_controller.kube.discovery import NoKindMatchError
from kustomize_controller.kube.errors import ApiError, KubeError, NotFoundError
from kustomize_controller.runtime.clock import Clock

_IMMUTABLE_MESSAGE = re.compile(r"is\simmutable|immutable\sfield")
# The smallest group of remembered objects (one kind, one namespace) read with a list instead of one GET
# each. A list is served by scanning every object of that kind in the namespace: a few objects in a crowded
# namespace (thousands of Kustomizations of four objects each in one) are cheaper to GET.
LIST_MIN_OBJECTS = 16


def is_immutable_error(err: BaseException) -> bool:
    """Upstream ``IsImmutableError``: reason Conflict or Invalid, or an "immutable" message."""
    if isinstance(err, ApiError) and err.reason in ("Conflict", "Invalid"):
        return True
    text = err.message if isinstance(err, ApiError) else str(err)
    return bool(_IMMUTABLE_MESSAGE.search(text))


def error_text(err: BaseException) -> str:
    return err.message if isinstance(err, ApiError) else str(err)


def dry_run_error_message(ref: ObjRef, err: BaseException) -> str:
    """``<ref> dry-run failed (<Reason>): <msg>`` with upstream's NotFound and conflict variants."""
    msg = error_text(err)
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
class Plan:
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
    listed: Object | None = None  # its metadata from the group's list (``Planning._list_live``)


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


def make_plans(objects: Sequence[Object]) -> list[Plan]:
    """One plan per object, on copies, in apply order."""
    return [Plan(desired=o, ref=ObjRef.from_object(o)) for o in sort_objects(deep_copy(o) for o in objects)]


class NoteDeleted:
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


class Engine:
    """What every verb of the ``ResourceManager`` shares (set by its ``__init__``)."""

    client: ApplyClient
    clock: Clock
    field_manager: str
    concurrency: int
    verified: VerifiedApplies | None

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
            raise ApplyStepError(f"{ref} query failed: {error_text(exc)}") from exc

    async def _dry_run(self, obj: Object) -> Object:
        return await self.client.apply(obj, field_manager=self.field_manager, force=True, dry_run=True)


class Planning(Engine):
    """Phase A (module contract)."""

    async def _validate_all(
        self, plans: Sequence[Plan], options: ApplyOptions, *, per_object_errors: bool
    ) -> dict[int, Exception]:
        """Phase A for ``plans``: the failures by index (module contract, "Phase A").

        At most ``concurrency`` objects in flight, all in one task group: nothing is left running when
        this returns or raises. A failure that ends the phase (any failure of an apply; in a plan,
        ``per_object_errors``, only one that is not the object's own ``ApplyEngineError``, which is that
        object's result) cancels the objects after it in apply order: their requests in flight are
        cancelled and the queued ones never start. Those before it run on, so the failure that counts
        is still the first in apply order, as if every object had been validated."""
        context = self._fingerprint_context(options)
        await self._list_live(plans, options)
        gate = asyncio.Semaphore(self.concurrency)
        failures: dict[int, Exception] = {}
        tasks: list[asyncio.Task[None]] = []

        async def validate(index: int, plan: Plan) -> None:
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

    async def _list_live(self, plans: Sequence[Plan], options: ApplyOptions) -> None:
        """Read the metadata of large groups of remembered objects with one list each (module contract).

        A group is the expected objects of one apiVersion, kind and namespace that the verified memory
        has a proof of; one of at least ``LIST_MIN_OBJECTS`` is listed, metadata only, selected by the
        owner labels, and each member found gets it as ``plan.listed``. A failing list, a member not
        found (deleted, or its owner labels edited) and every smaller group are read whole, one GET each,
        as without the list: their outcome and errors come from there."""
        verified, expected, owner = self.verified, options.expected, options.owner
        if verified is None or not expected or not owner:
            return
        groups: dict[tuple[str, str, str], list[Plan]] = {}
        for plan in plans:
            if plan.ref in expected and verified.knows(plan.ref):
                key = (str(plan.desired.get("apiVersion") or ""), plan.ref.kind, plan.ref.namespace)
                groups.setdefault(key, []).append(plan)
        selector = ",".join(f"{key}={value}" for key, value in sorted(owner.items()))
        for (api_version, kind, namespace), members in groups.items():
            if len(members) < LIST_MIN_OBJECTS:
                continue
            try:
                items = await self.client.list(api_version, kind, namespace or None, label_selector=selector,
                                               metadata_only=True)
            except (KubeError, ValueError):
                continue
            found = {(str(metadata(i).get("namespace") or ""), str(metadata(i).get("name") or "")): i for i in items}
            for plan in members:
                plan.listed = found.get((plan.ref.namespace, plan.ref.name))

    def _proven_by_list(self, plan: Plan, options: ApplyOptions) -> bool:
        """Planned ``unchanged`` from its listed metadata when the memory proves it (``verified.py``: the
        proof is the object's metadata); skip rules and anything unproven are decided from the object read
        whole, as without the list."""
        live, verified = plan.listed, self.verified
        if live is None or verified is None:
            return False
        desired = plan.desired
        if (any_in_metadata(desired, options.exclusion_selector) or any_in_metadata(live, options.exclusion_selector)
                or any_in_metadata(desired, options.if_not_present_selector)):
            return False
        if not verified.is_verified(plan.ref, plan.fingerprint, live):
            return False
        plan.live = live
        plan.entry = ChangeSetEntry.for_object(live, Action.UNCHANGED)
        return True

    def _fingerprint_context(self, options: ApplyOptions) -> str:
        """Everything besides the manifest that shapes an unchanged plan (see verified.py)."""
        if self.verified is None:
            return ""
        return f"{self.field_manager}|{options.cleanup!r}|{options.ignore_rules!r}|{options.migrate_api_version}"

    def _probe_first(self, plan: Plan, options: ApplyOptions) -> bool:
        """Whether to dry-run before reading: an object new to the inventory most likely does not exist,
        and a dry-run create says so (an empty resourceVersion) — its GET would only answer 404."""
        if options.expected is None or plan.ref in options.expected or options.migrate_api_version:
            return False
        desired = plan.desired
        return not (
            any_in_metadata(desired, options.exclusion_selector)
            or any_in_metadata(desired, options.if_not_present_selector)
        )

    async def _validate(self, plan: Plan, options: ApplyOptions, context: str = "") -> None:
        desired = plan.desired
        strip_invalid_ca_bundle(desired)
        if self.verified is not None:
            plan.fingerprint = fingerprint(desired, context=context)
        if self._proven_by_list(plan, options):
            return
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

    async def _migrate_api_version(self, plan: Plan, live: Object) -> None:
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
                f"to {api_version}: {error_text(exc)}"
            ) from exc
        plan.migrated = True

    def _should_force(self, desired: Object, live: Object, options: ApplyOptions) -> bool:
        return (
            options.force
            or any_in_metadata(desired, options.force_selector)
            or any_in_metadata(live, options.force_selector)
        )

    def _plan_from_dry_run(self, plan: Plan, dry_run: Object, options: ApplyOptions) -> None:
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

    def _hold_drift(self, plan: Plan, options: ApplyOptions, dry_run: Object | None) -> bool:
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
