"""Phases A2 and B of a stage: recreates, then writes (``manager.py``'s contract).

``_recreate`` deletes an object planned for re-creation (an immutable field with ``force``), waits
until it is gone (``wait_interval`` / ``wait_timeout``) and dry-runs it again; ``_write`` sends the
cleanup patch a plan needs, then the server-side apply of the desired object (ignored drifting paths
stripped or adopted), and remembers the answer as verified. Both are called in apply order, one at a
time, and add what they wrote to ``done``; their errors carry ``done`` as the change set:
``<Kind/ns/name> immutable field detected, ...``, ``<Kind/ns/name> metadata.managedFields cleanup
failed: ...``, ``<Kind/ns/name> apply failed: ...`` (``ApplyFailedError``: refused or maybe stored).
"""

from __future__ import annotations

from typing import Any

from kustomize_controller.apply.changeset import Action, ChangeSet, ChangeSetEntry
from kustomize_controller.apply.drift import apply_resolutions
from kustomize_controller.apply.errors import ApplyFailedError, ApplyStepError, DryRunError
from kustomize_controller.apply.objects import ObjRef, deep_copy
from kustomize_controller.apply.options import ApplyOptions
from kustomize_controller.apply.plan import Plan, Planning, dry_run_error_message, error_text
from kustomize_controller.kube.errors import ApiError, KubeError, NotFoundError


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

    async def _write(self, plan: Plan, done: ChangeSet) -> None:
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
                    f"{live_ref} metadata.managedFields cleanup failed: {error_text(exc)}",
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
                f"{ref} apply failed: {error_text(exc)}", change_set=ChangeSet(list(done.entries)),
                entry=plan.entry or ChangeSetEntry.for_object(plan.desired, Action.UNKNOWN),
                refused=isinstance(exc, ApiError) and 400 <= exc.status < 500,
            ) from exc
        if self.verified is not None and plan.fingerprint and not plan.resolutions:
            # the answer is the object as this apply of the desired manifest left it: the next dry-run
            # of the same manifest would find it unchanged (verified.py), so it is not paid for
            self.verified.remember(ref, plan.fingerprint, applied)
        if plan.entry is not None:
            done.add(plan.entry)
