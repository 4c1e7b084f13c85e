"""Cancelling a health wait when the same object is enqueued again (gate ``CancelHealthCheckOnNewRevision``).

Upstream (fluxcd/pkg ``runtime/controller`` queue hooks) lets a reconcile listen for "this object was
enqueued again" and cancels the health check when it happens, so a new source revision, spec change,
``requestedAt`` or config change does not wait behind a long health timeout.

Contract:
- ``EnqueueHooks.listen(request)`` (a context manager) registers one ``Interrupt`` for the duration of
  a reconcile; ``dispatch(request, source)`` fires every listener registered for that request, once,
  recording what triggered it (the first trigger wins), and unregisters them.
- Only the event handlers the application wires call ``dispatch`` (the Kustomization watch and the
  source/config map functions, as upstream's wrapped handlers); periodic and backoff requeues do not.
- ``dispatch(..., final=True)`` marks an event after which waiting is pointless: the object is being
  deleted, is gone, or is suspended. A listener registered with ``final_only=True`` fires only on
  those (health waits released from their worker listen so even without the gate: no wait outlives
  its Kustomization or holds its deletion); the others fire on every dispatch.
- ``Interrupt.race(awaitable)`` runs the awaitable until it finishes or the interrupt fires (already
  fired → at once); on an interrupt the awaitable is cancelled and ``HealthCheckCanceledError`` is raised
  carrying the trigger. A result that is ready at the same time as the interrupt wins.
- Single event loop, no locks needed; nothing here outlives the reconcile that registered it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from kustomize_controller.runtime.controller import Request

T = TypeVar("T")


@dataclass(frozen=True)
class TriggerSource:
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


class HealthCheckCanceledError(Exception):
    def __init__(self, source: TriggerSource) -> None:
        super().__init__(str(source))
        self.source = source


class Interrupt:
    def __init__(self, *, final_only: bool = False) -> None:
        self._fired = asyncio.Event()
        self.source: TriggerSource | None = None
        self.final_only = final_only

    @property
    def fired(self) -> bool:
        return self._fired.is_set()

    def fire(self, source: TriggerSource) -> None:
        if not self._fired.is_set():
            self.source = source
            self._fired.set()

    async def race(self, awaitable: Awaitable[T]) -> T:
        work: asyncio.Future[T] = asyncio.ensure_future(awaitable)
        waiter: asyncio.Future[bool] = asyncio.ensure_future(self._fired.wait())
        futures: list[asyncio.Future[Any]] = [work, waiter]
        try:
            await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for future in futures:
                if not future.done():
                    future.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await future
        if work.done() and not work.cancelled():
            return work.result()
        assert self.source is not None
        raise HealthCheckCanceledError(self.source)


class EnqueueHooks:
    def __init__(self) -> None:
        self._listeners: dict[Request, list[Interrupt]] = {}

    @contextlib.contextmanager
    def listen(self, request: Request, *, final_only: bool = False) -> Iterator[Interrupt]:
        interrupt = Interrupt(final_only=final_only)
        self._listeners.setdefault(request, []).append(interrupt)
        try:
            yield interrupt
        finally:
            listeners = self._listeners.get(request)
            if listeners is not None and interrupt in listeners:
                listeners.remove(interrupt)
                if not listeners:
                    del self._listeners[request]

    def dispatch(self, request: Request, source: TriggerSource, *, final: bool = False) -> None:
        listeners = self._listeners.pop(request, [])
        staying = [i for i in listeners if i.final_only and not final]
        for interrupt in listeners:
            if not interrupt.final_only or final:
                interrupt.fire(source)
        if staying:
            self._listeners[request] = staying

    def __len__(self) -> int:
        return sum(len(v) for v in self._listeners.values())
