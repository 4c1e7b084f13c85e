"""Writing a Kustomization's finalizers and status back (upstream's serial patcher).

Contract:
- ``StatusPatcher`` remembers what was last read or written and sends only what changed: a JSON
  merge patch of ``metadata.finalizers`` on the object, and a JSON merge patch of the changed
  top-level ``status`` fields on the ``/status`` subresource, with field manager
  ``gotk-kustomize-controller`` (upstream's status owner). Nothing changed → no request.
- Fields that disappeared from the status are sent as ``null`` (merge-patch deletion); lists
  (conditions, history, inventory entries) are replaced whole, which is right because this
  controller owns every condition type it writes.
- Like upstream, patches carry no resourceVersion precondition: a concurrent spec edit never makes a
  status write fail, and the watch delivers the edit for another reconcile. Transient failures
  (timeouts, 5xx, conflicts) are retried with a short backoff through the clock; the last error is
  raised if every attempt fails, so the controller retries the whole reconcile.
- A 429 or 5xx the client already waited out (``ApiError.waited_out``: it sent the patch again after
  each ``Retry-After`` the server named, 10 times) is not retried here: retrying that whole sequence
  would multiply the requests to a server that is shedding load (5 × 11 for one write). One without
  ``Retry-After`` (a proxy's, an aggregated API's) the client did not retry, and is retried here.
- Patches are serialised (a lock): the progress timer and the reconcile may both write, and each
  patch must be computed against what the one before it wrote.
- ``patch_fields(ks, fields, attempts=)`` writes only those top-level status fields (the others stay as
  last written and are sent by the next ``patch``), with ``attempts`` tries: the apply step records
  its inventory before an apply without publishing its in-flight conditions, in one try (a failure
  fails the reconcile at once, as an apply request's does, and the reconciler retries it).
- When the object is being deleted, NotFound is expected (the finalizer was just removed and the
  object is gone) and is not an error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

from kustomize_controller.api.kustomization import API_VERSION, KIND, Kustomization
from kustomize_controller.api.meta import STATUS_OWNER
from kustomize_controller.kube.client import PatchType
from kustomize_controller.kube.errors import (
    ApiError,
    ConflictError,
    KubeError,
    NotFoundError,
    is_transient,
)
from kustomize_controller.runtime.clock import Clock


class Patcher(Protocol):
    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        body: Any,
        *,
        patch_type: PatchType,
        field_manager: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]: ...


def status_document(ks: Kustomization) -> dict[str, Any]:
    """The full status as JSON (the API models also write fields changed in place, e.g. conditions)."""
    dumped: dict[str, Any] = ks.status.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


def status_merge_patch(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """Top-level merge patch turning ``before`` into ``after`` (removed keys become null)."""
    patch: dict[str, Any] = {key: value for key, value in after.items() if before.get(key) != value}
    patch.update({key: None for key in before if key not in after})
    return patch


class StatusPatcher:
    def __init__(
        self,
        *,
        client: Patcher,
        obj: Mapping[str, Any],
        clock: Clock,
        attempts: int = 5,
        backoff: float = 0.2,
    ) -> None:
        self._client = client
        self._clock = clock
        self._attempts = attempts
        self._backoff = backoff
        meta = obj.get("metadata") or {}
        self._name: str = meta.get("name", "")
        self._namespace: str = meta.get("namespace", "")
        self._finalizers: list[str] = list(meta.get("finalizers") or [])
        self._status: dict[str, Any] = dict(obj.get("status") or {})
        self.requests = 0
        self._lock = asyncio.Lock()

    async def patch(self, ks: Kustomization) -> None:
        async with self._lock:
            await self._patch(ks)

    async def _patch(self, ks: Kustomization) -> None:
        deleting = ks.metadata.deletion_timestamp is not None
        finalizers = list(ks.metadata.finalizers)
        if finalizers != self._finalizers:
            body = {"metadata": {"finalizers": finalizers or None}}
            if await self._send(body, subresource=None, deleting=deleting):
                self._finalizers = finalizers
            else:
                return  # the object is gone
        status = status_document(ks)
        changes = status_merge_patch(self._status, status)
        if changes and await self._send({"status": changes}, subresource="status", deleting=deleting):
            self._status = status

    @property
    def busy(self) -> bool:
        """A patch is being sent (a new one would wait for it)."""
        return self._lock.locked()

    async def patch_fields(self, ks: Kustomization, fields: tuple[str, ...], *, attempts: int | None = None) -> None:
        async with self._lock:
            status = status_document(ks)
            after = {key: value for key, value in status.items() if key in fields}
            changes = status_merge_patch({key: value for key, value in self._status.items() if key in fields}, after)
            deleting = ks.metadata.deletion_timestamp is not None
            if changes and await self._send({"status": changes}, subresource="status", deleting=deleting,
                                            attempts=attempts):
                self._status = {**{k: v for k, v in self._status.items() if k not in fields}, **after}

    async def _send(
        self, body: dict[str, Any], *, subresource: str | None, deleting: bool, attempts: int | None = None
    ) -> bool:
        """Send one patch with retries; False when the object no longer exists while deleting."""
        delay = self._backoff
        attempts = attempts or self._attempts
        for attempt in range(1, attempts + 1):
            try:
                self.requests += 1
                await self._client.patch(
                    API_VERSION,
                    KIND,
                    self._name,
                    self._namespace,
                    body,
                    patch_type="merge",
                    field_manager=STATUS_OWNER,
                    subresource=subresource,
                )
                return True
            except NotFoundError:
                if deleting:
                    return False
                raise
            except KubeError as err:
                # a 429 or 5xx whose Retry-After the client waited out already is not retried on top;
                # one without it (a proxy's, an aggregated API's) the client did not retry: we do
                waited_out = isinstance(err, ApiError) and err.waited_out
                retryable = isinstance(err, ConflictError) or (is_transient(err) and not waited_out)
                if not retryable or attempt == attempts:
                    raise
            await self._clock.sleep(delay)
            delay = min(delay * 2, 5.0)
        return True  # unreachable: the loop returns or raises
