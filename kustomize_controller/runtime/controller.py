"""Controller: workers that pull requests from a workqueue and call a ``Reconciler``.

The user contract (controller-runtime ``pkg/reconcile``):
- A ``Request`` is only a key (``namespace``, ``name``); the reconciler reads the current state itself.
- ``reconcile`` returns a ``Result``: ``requeue_after > 0`` → forget the backoff and run again after
  that delay; ``requeue=True`` → run again after the rate limiter's backoff; otherwise → forget the
  backoff, done.
- Raising ``TerminalError`` → logged, counted (``terminal_reconcile_errors_total``), not retried.
- Raising anything else → logged with its traceback, counted, and retried with the per-item
  exponential backoff (750 ms doubling to 15 min by default); no ``forget``, so the backoff keeps
  growing while the failure repeats. Exceptions outside ``ReconcileError``/``KubeError`` are what Go
  calls panics (bugs): they are also counted in ``reconcile_panics_total``.
- One key is never reconciled by two workers at once (the workqueue guarantees it); up to
  ``concurrency`` different keys run in parallel.

Each reconcile runs with structlog context ``controller``, ``name``, ``namespace`` and a fresh
``reconcile_id`` (UUID) bound in contextvars, so every log line inside it carries them.

Releasing the worker (``release_worker()``, ours): a reconcile that has only waiting left to do (a
health check) may hand its worker back, so ``concurrency`` bounds reconciles that do work, not waits.
The reconcile then runs on as a task the controller owns; its key stays *processing* in the queue
until it returns, so one reconcile per key at a time still holds by construction (an add meanwhile
marks the key dirty and it runs once more afterwards), and its ``Result`` is handled as any other.
At most ``max_detached`` reconciles are released at once; beyond that (or with ``max_detached=0``)
``release_worker()`` returns False and the reconcile keeps its worker, which is upstream's behaviour.
The runtime knows nothing of what the reconcile waits for. The released reconcile is found through a
context variable set for the reconcile's task (as Go passes values in a reconcile's ``ctx``).

Busy workers (``busy_workers``, a :class:`BusyWorkers` the application may share): how many reconciles
hold a worker now, counted exactly as the ``controller_runtime_active_workers`` gauge (a released
reconcile no longer counts). Others read it to learn whether more work is on its way (the builder's wait
for company, ``kustomize/batch_queue.py``).

Shutdown (``stop``): the queue stops handing out work (queued keys are dropped) and in-flight
reconciles are cancelled at once — controller-runtime cancels the context every reconcile runs with
as soon as the manager stops, and a reconcile may be waiting on anything (a health check for
minutes, an API call to a server that is going away); letting it run on made a SIGTERM wait out the
whole grace period. A reconcile sees ``CancelledError`` at its current ``await``; its cleanup code
runs and the key is neither retried nor counted as a result. ``run`` returns when the workers are
idle; the manager bounds that wait with its grace period (for cleanup that does not end). Released
reconciles are cancelled at ``stop`` too, and with everything else when ``run`` is cancelled (lost
leadership).

Not promised: a reconcile timeout (off, as in controller-runtime's default); ordering between keys.
"""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from kustomize_controller.kube.errors import KubeError
from kustomize_controller.runtime.clock import Clock
from kustomize_controller.runtime.informer import (
    DeletedFinalStateUnknown,
    FuncHandler,
    Informer,
    wait_for_cache_sync,
)
from kustomize_controller.runtime.logs import get_logger
from kustomize_controller.runtime.metrics import RuntimeMetrics
from kustomize_controller.runtime.ratelimit import ItemExponentialRateLimiter, RateLimiter
from kustomize_controller.runtime.store import Obj
from kustomize_controller.runtime.workqueue import QueueShutDown, WorkQueue

DEFAULT_CACHE_SYNC_TIMEOUT = 120.0


@dataclass(frozen=True, order=True)
class Request:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @classmethod
    def for_object(cls, obj: Mapping[str, Any]) -> Request:
        meta = obj.get("metadata") or {}
        return cls(namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""))


@dataclass(frozen=True)
class Result:
    requeue_after: float = 0.0
    requeue: bool = False


class ReconcileError(Exception):
    """An expected reconcile failure (retried with backoff, not counted as a panic)."""


class TerminalError(ReconcileError):
    """A failure retrying cannot fix: logged and counted, never requeued."""


class Reconciler(Protocol):
    async def reconcile(self, request: Request) -> Result: ...


MapFunc = Callable[[Obj], Iterable[Request]]


class _WorkerSlot:
    """The worker a running reconcile holds, and whether it has been released."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self.released = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def release(self) -> bool:
        if self.released.is_set():
            return True
        return self.controller._detach(self)


# The worker slot of the reconcile running in the current task (None outside a releasable reconcile).
_current_slot: contextvars.ContextVar[_WorkerSlot | None] = contextvars.ContextVar("worker_slot", default=None)


def release_worker() -> bool:
    """Hand the current reconcile's worker back to the pool; the reconcile continues (module docstring).

    True when released (or already released); False when not possible: outside a controller's
    reconcile, releasing disabled, the bound of released reconciles reached, or the controller stopping.
    Call it only when what is left is waiting: the call itself never blocks."""
    slot = _current_slot.get()
    return slot.release() if slot is not None else False


class BusyWorkers:
    """How many reconciles hold one of a controller's workers now (module docstring)."""

    def __init__(self) -> None:
        self.active = 0


class Controller:
    def __init__(
        self,
        *,
        name: str,
        reconciler: Reconciler,
        clock: Clock,
        metrics: RuntimeMetrics,
        concurrency: int = 4,
        rate_limiter: RateLimiter[Request] | None = None,
        cache_sync_timeout: float = DEFAULT_CACHE_SYNC_TIMEOUT,
        logger: Any = None,
        max_detached: int = 0,
        busy_workers: BusyWorkers | None = None,
    ) -> None:
        """``max_detached``: how many reconciles may release their worker at once (0: none);
        ``busy_workers``: the count this controller keeps of reconciles holding a worker (a new one if None)."""
        if concurrency < 1:
            raise ValueError(f"controller {name}: concurrency must be >= 1, got {concurrency}")
        if max_detached < 0:
            raise ValueError(f"controller {name}: max_detached must be >= 0, got {max_detached}")
        self.max_detached = max_detached
        self._detached: set[asyncio.Task[None]] = set()
        self.name = name
        self.reconciler = reconciler
        self.concurrency = concurrency
        self.cache_sync_timeout = cache_sync_timeout
        self._clock = clock
        self._metrics = metrics
        self.queue: WorkQueue[Request] = WorkQueue(
            clock=clock,
            name=name,
            rate_limiter=rate_limiter or ItemExponentialRateLimiter(),
            metrics=metrics.queue(name, controller=name),
        )
        self._informers: list[Informer] = []
        self._log = logger or get_logger("controller", controller=name)
        self._stopping = False
        self._stop_event = asyncio.Event()
        self._workers: list[asyncio.Task[None]] = []
        metrics.controller(name, max_concurrent=concurrency)
        self._total = {
            r: metrics.reconcile_total.labels(controller=name, result=r)
            for r in ("success", "error", "requeue", "requeue_after")
        }
        self._errors = metrics.reconcile_errors_total.labels(controller=name)
        self._terminal = metrics.terminal_reconcile_errors_total.labels(controller=name)
        self._panics = metrics.reconcile_panics_total.labels(controller=name)
        self._time = metrics.reconcile_time_seconds.labels(controller=name)
        self._active = metrics.active_workers.labels(controller=name)
        self.busy_workers = busy_workers or BusyWorkers()
        self._detached_gauge = metrics.detached_reconciles.labels(controller=name)

    # ------------------------------------------------------------------------------------- sources

    def watch(
        self,
        informer: Informer,
        *,
        map_func: MapFunc | None = None,
        predicate: Callable[[Obj | None, Obj], bool] | None = None,
    ) -> None:
        """Enqueue requests for an informer's events: the object's own key, or ``map_func(obj)``
        (e.g. the Kustomizations that reference a changed source). ``predicate(old, new)`` filters
        adds (old is ``None``) and updates; deletes always pass."""
        self._informers.append(informer)
        mapper: MapFunc = map_func or (lambda obj: (Request.for_object(obj),))

        def enqueue(obj: Obj) -> None:
            for req in mapper(obj):
                self.queue.add(req)

        def on_add(obj: Obj, _initial: bool) -> None:
            if predicate is None or predicate(None, obj):
                enqueue(obj)

        def on_update(old: Obj, new: Obj) -> None:
            if predicate is None or predicate(old, new):
                enqueue(new)

        def on_delete(obj: Obj | DeletedFinalStateUnknown) -> None:
            enqueue(obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj)

        informer.add_handler(FuncHandler(add=on_add, update=on_update, delete=on_delete))

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers)

    # ---------------------------------------------------------------------------------------- run

    async def run(self) -> None:
        """Wait for the watched caches, then run the workers until ``stop()`` (or cancellation)."""
        self._log.info("Starting Controller")
        synced = asyncio.ensure_future(
            wait_for_cache_sync(self._informers, clock=self._clock, sync_timeout=self.cache_sync_timeout)
        )
        stopped = asyncio.ensure_future(self._stop_event.wait())
        try:
            await asyncio.wait([synced, stopped], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not synced.done():
                synced.cancel()
        if self._stopping:
            return
        synced.result()  # raises TimeoutError when the caches did not sync in time
        self._log.info("Starting workers", worker_count=self.concurrency)
        try:
            async with asyncio.TaskGroup() as tg:
                pump = tg.create_task(self.queue.run())
                self._workers = [tg.create_task(self._worker(tg)) for _ in range(self.concurrency)]
                # a worker cancelled by ``stop`` ends with CancelledError: that is its normal end here
                await asyncio.gather(*self._workers, return_exceptions=True)
                pump.cancel()
        finally:
            self.queue.shut_down(discard_queued=True)
            self._workers = []
            self._log.info("All workers finished")

    def stop(self) -> None:
        """Stop taking work: queued keys are dropped and in-flight reconciles cancelled (module contract)."""
        self._stopping = True
        self._stop_event.set()
        self.queue.shut_down(discard_queued=True)
        for task in list(self._detached):
            task.cancel()
        self._cancel_workers()

    def _cancel_workers(self) -> None:
        # idle workers would end on QueueShutDown by themselves; cancelling them too is harmless (a
        # worker's cancellation cancels the reconcile it holds, see ``_worker``)
        for worker in self._workers:
            if not worker.done():
                worker.cancel()

    @property
    def busy(self) -> bool:
        return bool(self.queue.processing)

    @property
    def detached(self) -> int:
        """Reconciles running without a worker (released by ``release_worker``)."""
        return len(self._detached)

    async def _worker(self, tg: asyncio.TaskGroup) -> None:
        while True:
            try:
                req = await self.queue.get()
            except QueueShutDown:
                return
            if not self.max_detached:
                try:
                    await self.reconcile_handler(req)
                finally:
                    self.queue.done(req)
                continue
            slot = _WorkerSlot(self)
            slot.task = tg.create_task(self._releasable(req, slot), name=f"reconcile {self.name} {req}")
            released = asyncio.ensure_future(slot.released.wait())
            try:
                await asyncio.wait([slot.task, released], return_when=asyncio.FIRST_COMPLETED)
            finally:
                released.cancel()
                if not slot.task.done() and not slot.released.is_set():
                    slot.task.cancel()  # this worker is being cancelled: so is the reconcile it holds

    async def _releasable(self, req: Request, slot: _WorkerSlot) -> None:
        _current_slot.set(slot)  # this task's own context copy: visible to this reconcile only
        try:
            await self.reconcile_handler(req, slot=slot)
        finally:
            self.queue.done(req)
            if slot.task is not None and slot.task in self._detached:
                self._detached.discard(slot.task)
                self._detached_gauge.dec()

    def _detach(self, slot: _WorkerSlot) -> bool:
        if self._stopping or slot.task is None or len(self._detached) >= self.max_detached:
            return False
        self._detached.add(slot.task)
        self._detached_gauge.inc()
        self._worker_freed()
        slot.released.set()
        return True

    async def reconcile_handler(self, req: Request, *, slot: _WorkerSlot | None = None) -> None:
        """Run one reconcile and map its outcome onto queue operations and metrics (A3)."""
        start = self._clock.monotonic()
        self._worker_taken()
        ctx = {
            "controller": self.name,
            "name": req.name,
            "namespace": req.namespace,
            "reconcile_id": str(uuid.uuid4()),
        }
        try:
            with structlog.contextvars.bound_contextvars(**ctx):
                try:
                    result = await self.reconciler.reconcile(req)
                except asyncio.CancelledError:
                    raise
                except TerminalError as err:
                    self._terminal.inc()
                    self._errors.inc()
                    self._total["error"].inc()
                    self._log.error("Reconciler error (terminal, not retried)", error=str(err))
                    return
                except Exception as err:
                    if not isinstance(err, ReconcileError | KubeError):
                        self._panics.inc()
                    self._errors.inc()
                    self._total["error"].inc()
                    if not self._stopping:
                        self.queue.add_rate_limited(req)
                    self._log.exception("Reconciler error", error=str(err))
                    return
                if result.requeue_after > 0:
                    self.queue.forget(req)
                    self.queue.add_after(req, result.requeue_after)
                    self._total["requeue_after"].inc()
                elif result.requeue:
                    self.queue.add_rate_limited(req)
                    self._total["requeue"].inc()
                else:
                    self.queue.forget(req)
                    self._total["success"].inc()
        finally:
            if slot is None or not slot.released.is_set():
                self._worker_freed()  # a released reconcile gave its worker back already
            self._time.observe(self._clock.monotonic() - start)

    def _worker_taken(self) -> None:
        self._active.inc()
        self.busy_workers.active += 1

    def _worker_freed(self) -> None:
        self._active.dec()
        self.busy_workers.active -= 1
