"""Phases A2 and B of a stage: recreates, then writes (``manager.py``'s contract).

``_recreate`` deletes an object planned for re-creation (an immutable field with ``force``), waits
until it is gone (``wait_interval`` / ``wait_timeout``) and dry-runs it again; recreates run one by one,
in apply order. ``_write_all`` then writes every planned object in apply order, one kind after the other
(the kind order is what the stages' sort order is for: a Role before its RoleBinding, a ServiceAccount
before the Deployment that uses it); the objects of one kind — a run of the apply order, sorted by
namespace and name only — are written ``concurrency`` at a time when there are at least
``WRITE_MIN_OBJECTS`` of them, one at a time otherwise. ``_write`` sends the cleanup patch a plan
needs, then the server-side apply of the desired object (ignored drifting paths stripped or adopted),
and remembers the answer as verified.

Failures: once a write of a kind failed, no other write starts (those in flight finish); the first
failure in apply order is raised, carrying as its change set everything written before it returned —
previous kinds, and the objects of its own kind that were written, in apply order:
``<Kind/ns/name> immutable field detected, ...``, ``<Kind/ns/name> metadata.managedFields cleanup
failed: ...``, ``<Kind/ns/name> apply failed: ...`` (``ApplyFailedError``: refused or maybe stored).
Upstream writes one object at a time; the difference, for a kind of ``WRITE_MIN_OBJECTS`` or more
objects only, is how many are in flight: the order of the kinds is the same, and so are the change set,
events and inventory of a successful apply; after a failed write they may list objects of its kind that
come after it in apply order (docs/differences.md).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from typing import Any

from kustomize_controller.apply.changeset import Action, ChangeSet, ChangeSetEntry
from kustomize_controller.apply.drift import apply_resolutions
from kustomize_controller.apply.errors import ApplyEngineError, ApplyFailedError, ApplyStepError, DryRunError
from kustomize_controller.apply.objects import ObjRef, deep_copy
from kustomize_controller.apply.options import ApplyOptions
from kustomize_controller.apply.plan import Plan, Planning, dry_run_error_message, error_text
from kustomize_controller.kube.errors import ApiError, KubeError, NotFoundError

# Fewer writes of one kind than this go one at a time, as upstream: a Kustomization of a few objects of a
# kind gains little from concurrent writes, and a failure then leaves what it leaves upstream (nothing after
# the failed object written, an approval not consumed by a retry that wrote nothing).
WRITE_MIN_OBJECTS = 16


class Writing(Planning):
    """Phases A2 and B (module contract)."""

    async def _recreate(self, plan: Plan, options: ApplyOptions, done: ChangeSet) -> None:
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
                f"{ref} immutable field detected, failed to delete object: {error_text(exc)}",
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

    async def _write_all(self, plans: Sequence[Plan], done: ChangeSet) -> None:
        """Phase B for every plan that writes (module contract); what was written is added to ``done``."""
        writes = [p for p in plans if p.write]
        for _, run in itertools.groupby(writes, key=lambda p: (p.ref.group, p.ref.kind)):
            await self._write_kind(list(run), done)

    async def _write_kind(self, run: list[Plan], done: ChangeSet) -> None:
        """The writes of one kind, ``concurrency`` at a time when there are at least ``WRITE_MIN_OBJECTS``
        of them, else one at a time (upstream's order, so a failure leaves exactly what it leaves
        upstream); none starts after one failed."""
        gate = asyncio.Semaphore(self.concurrency if len(run) >= WRITE_MIN_OBJECTS else 1)
        failures: dict[int, ApplyEngineError] = {}
        written: list[bool] = [False] * len(run)

        async def write(index: int, plan: Plan) -> None:
            async with gate:
                if failures:
                    return
                try:
                    await self._write(plan)
                except ApplyEngineError as exc:
                    failures[index] = exc
                    return
                written[index] = True

        async with asyncio.TaskGroup() as group:
            for index, plan in enumerate(run):
                group.create_task(write(index, plan))
        done.extend([plan.entry for plan, ok in zip(run, written, strict=True) if ok and plan.entry is not None])
        if failures:
            first = failures[min(failures)]
            first.change_set = ChangeSet(list(done.entries))
            raise first

    async def _write(self, plan: Plan) -> None:
        """Cleanup patch and apply of one object; its errors carry no change set (``_write_kind`` sets it)."""
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
                raise ApplyStepError(f"{live_ref} metadata.managedFields cleanup failed: {error_text(exc)}") from exc
        payload: dict[str, Any] = deep_copy(plan.desired)
        if plan.resolutions:
            apply_resolutions(payload, plan.resolutions)
        try:
            applied = await self.client.apply(payload, field_manager=self.field_manager, force=True)
        except KubeError as exc:
            # a 4xx is the server's refusal (nothing stored); any other failure may follow the commit
            raise ApplyFailedError(
                f"{ref} apply failed: {error_text(exc)}",
                entry=plan.entry or ChangeSetEntry.for_object(plan.desired, Action.UNKNOWN),
                refused=isinstance(exc, ApiError) and 400 <= exc.status < 500,
            ) from exc
        if self.verified is not None and plan.fingerprint and not plan.resolutions:
            # the answer is the object as this apply of the desired manifest left it: the next dry-run
            # of the same manifest would find it unchanged (verified.py), so it is not paid for
            self.verified.remember(ref, plan.fingerprint, applied)
