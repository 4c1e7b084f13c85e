"""Deletion of a Kustomization: what happens to the objects it applied (upstream ``finalize``, §5.14).

Objects are deleted only when the Kustomization is not suspended, its inventory is not empty, and
``deletionPolicy`` is ``Delete``, ``WaitForTermination``, or ``MirrorPrune`` (the default) with
``prune: true``; ``Orphan`` never deletes. Deletion follows the prune rules (only objects still
carrying both owner labels and none of the exclusions, background propagation).

Never blocked forever: when the service account to impersonate is gone, the objects are listed in a
Warning event and left alone; a ``WaitForTermination`` timeout is logged and reported, then the
finalizer is released all the same. Only a failed DELETE, or a client that cannot be built (remote
kubeconfig Secret gone), keeps the finalizer (a Warning event, then ``ReconcileError``: retried with
backoff), so that nothing is orphaned by a transient error.
"""

from __future__ import annotations

import contextlib

import structlog

from kustomize_controller.api.kustomization import DeletionPolicy
from kustomize_controller.api.meta import FINALIZER
from kustomize_controller.apply.errors import PruneError
from kustomize_controller.apply.inventory import inventory_objects
from kustomize_controller.apply.prune import delete_all, wait_for_termination
from kustomize_controller.apply.selectors import owner_labels
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.reconcile.apply_step import log_already_gone
from kustomize_controller.reconcile.context import ReconcileContext
from kustomize_controller.reconcile.tenancy import TenancyOptions, TenantClientError, can_impersonate, tenant_client
from kustomize_controller.runtime.controller import ReconcileError

# Reconcile logs carry the controller, name, namespace and reconcile_id bound by the runtime.
_log = structlog.get_logger()


def should_delete_resources(ctx: ReconcileContext) -> bool:
    ks = ctx.ks
    if ks.spec.suspend or ks.status.inventory is None or not ks.status.inventory.entries:
        return False
    policy = ks.get_deletion_policy()
    if policy == DeletionPolicy.MIRROR_PRUNE:
        return ks.spec.prune
    return policy in (DeletionPolicy.DELETE, DeletionPolicy.WAIT_FOR_TERMINATION)


async def finalize(ctx: ReconcileContext, *, client: KubeClient, tenancy: TenancyOptions) -> None:
    ks = ctx.ks
    revision = ks.status.last_applied_revision or ""
    origin = ks.status.last_applied_origin_revision or ""
    if should_delete_resources(ctx):
        objects = inventory_objects(ks.status.inventory)
        if await can_impersonate(ks, client=client, options=tenancy):
            async with contextlib.AsyncExitStack() as stack:
                try:
                    tenant = await stack.enter_async_context(tenant_client(ks, client=client, options=tenancy))
                except TenantClientError as err:
                    # upstream returns the error: the finalizer stays and deletion is retried with backoff
                    message = f"failed to build kube client: {err}"
                    await ctx.event(message, error=True, revision=revision, origin_revision=origin)
                    raise ReconcileError(message) from err
                try:
                    change_set = await delete_all(
                        tenant, objects, owner=owner_labels(ks.metadata.name or "", ks.metadata.namespace or ""),
                        already_gone=log_already_gone,
                    )
                except PruneError as err:
                    await ctx.event(
                        "pruning for deleted resource failed", error=True, revision=revision, origin_revision=origin
                    )
                    raise ReconcileError(f"pruning for deleted resource failed: {err}") from err
                if change_set:
                    await ctx.event(str(change_set), revision=revision, origin_revision=origin)
                    if ks.get_deletion_policy() == DeletionPolicy.WAIT_FOR_TERMINATION:
                        try:
                            await wait_for_termination(
                                tenant,
                                change_set,
                                clock=ctx.clock,
                                timeout_seconds=ks.get_timeout().total_seconds(),
                            )
                        except PruneError as err:
                            message = "failed to wait for resources termination"
                            _log.error(message, error=str(err))
                            await ctx.event(message, error=True, revision=revision, origin_revision=origin)
        else:
            listing = "\n".join(str(o.ref) for o in objects)
            message = f"unable to prune objects: \n{listing}"
            _log.error("skipping pruning, failed to find account to impersonate", objects=listing)
            await ctx.event(message, error=True, revision=revision, origin_revision=origin)
    if FINALIZER in ks.metadata.finalizers:
        ks.metadata.finalizers.remove(FINALIZER)
