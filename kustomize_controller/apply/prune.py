"""Garbage collection of stale objects (fluxcd/pkg ``ssa`` ``DeleteAll`` with the controller's options).

Contract:
- Only the objects passed in are considered (the caller passes old inventory − new inventory); nothing
  else is ever read or deleted.
- Order: the reverse of the apply order (webhooks first, CRDs and Namespaces last).
- For each object: GET the live object. 404 (or a kind the server no longer serves) → ``deleted``, as
  upstream reports it (its event and change set say ``deleted``), and ``already_gone(object)`` is called
  so that the caller can say that nothing was deleted (the reconcile logs ``already gone``); so is a 404
  answering the DELETE (deleted by someone else in between).
  A live object whose labels do not carry *both* owner labels with our values → ``skipped`` (it moved
  to another owner or was adopted by hand). A live object selecting any exclusion (``prune: disabled``,
  ``reconcile: disabled``, ``ssa: Ignore``, label or annotation) → ``skipped``. Otherwise DELETE with
  background propagation → ``deleted``. Errors → ``unknown`` and the next object is still processed.
- Errors are aggregated as upstream: ``delete failed, errors: <e1>;<e2>;`` where each is
  ``<Kind/ns/name> query failed: <msg>`` or ``<Kind/ns/name> delete failed: <msg>``; the raised
  ``PruneError`` carries the full change set.
- Prune never waits for termination (``wait_for_termination`` is the deletion-policy helper).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kustomize_controller.apply.changeset import Action, ChangeSet, ChangeSetEntry
from kustomize_controller.apply.client import ApplyClient, ReadClient
from kustomize_controller.apply.errors import PruneError
from kustomize_controller.apply.objects import ObjRef, join_api_version
from kustomize_controller.apply.selectors import (
    PRUNE_EXCLUSION_SELECTOR,
    Selector,
    any_in_metadata,
    has_owner_labels,
)
from kustomize_controller.apply.staging import ref_sort_key
from kustomize_controller.kube.discovery import NoKindMatchError
from kustomize_controller.kube.errors import ApiError, KubeError, NotFoundError
from kustomize_controller.runtime.clock import Clock


@dataclass(frozen=True, slots=True)
class StaleObject:
    """An inventory entry to delete: identity and the API version it was applied with."""

    ref: ObjRef
    version: str

    @property
    def api_version(self) -> str:
        return join_api_version(self.ref.group, self.version)

    def entry(self, action: Action) -> ChangeSetEntry:
        return ChangeSetEntry(ref=self.ref, version=self.version, action=action)


def _text(err: Exception) -> str:
    return err.message if isinstance(err, ApiError) else str(err)


async def delete_all(
    client: ApplyClient,
    objects: Sequence[StaleObject],
    *,
    owner: Mapping[str, str],
    exclusions: Selector = PRUNE_EXCLUSION_SELECTOR,
    propagation_policy: str = "Background",
    already_gone: Callable[[StaleObject], None] | None = None,
) -> ChangeSet:
    """Delete the stale objects (module contract); raises ``PruneError`` carrying the change set."""
    change_set = ChangeSet()
    errors = ""
    gone = already_gone or (lambda stale: None)
    for stale in sorted(objects, key=lambda s: ref_sort_key(s.ref), reverse=True):
        ref = stale.ref
        try:
            live = await client.get(stale.api_version, ref.kind, ref.name, ref.namespace or None)
        except (NotFoundError, NoKindMatchError):
            gone(stale)
            change_set.add(stale.entry(Action.DELETED))
            continue
        except (KubeError, ValueError) as exc:
            change_set.add(stale.entry(Action.UNKNOWN))
            errors += f"{ref} query failed: {_text(exc)};"
            continue
        if not has_owner_labels(live, owner) or any_in_metadata(live, exclusions):
            change_set.add(stale.entry(Action.SKIPPED))
            continue
        try:
            await client.delete(
                stale.api_version,
                ref.kind,
                ref.name,
                ref.namespace or None,
                propagation_policy=propagation_policy,
            )
        except NotFoundError:
            gone(stale)
        except KubeError as exc:
            change_set.add(stale.entry(Action.UNKNOWN))
            errors += f"{ref} delete failed: {_text(exc)};"
            continue
        change_set.add(stale.entry(Action.DELETED))
    if errors:
        raise PruneError(f"delete failed, errors: {errors}", change_set=change_set)
    return change_set


async def wait_for_termination(
    client: ReadClient,
    change_set: ChangeSet,
    *,
    clock: Clock,
    timeout_seconds: float,
    interval: float = 2.0,
) -> None:
    """Poll every ``deleted`` entry until it is gone (``deletionPolicy: WaitForTermination``).

    Raises ``PruneError`` ``<Kind/ns/name> termination timeout`` when the deadline passes first.
    """
    deadline = clock.monotonic() + timeout_seconds
    for entry in change_set:
        if entry.action is not Action.DELETED:
            continue
        ref = entry.ref
        api_version = join_api_version(ref.group, entry.version)
        while True:
            try:
                await client.get(api_version, ref.kind, ref.name, ref.namespace or None)
            except (NotFoundError, NoKindMatchError):
                break
            except KubeError as exc:
                raise PruneError(f"{ref} termination check failed: {_text(exc)}") from exc
            if clock.monotonic() >= deadline:
                raise PruneError(f"{ref} termination timeout")
            await clock.sleep(min(interval, max(0.0, deadline - clock.monotonic())))
