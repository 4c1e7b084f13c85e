"""The workqueue: client-go's ``util/workqueue`` contract on asyncio.

Contract (the basic queue):
- **Dedup.** A key waiting in the queue is there once; adding it again is a no-op (not counted).
- **Stingy.** A key handed out by ``get()`` is never handed out again before ``done(key)``. A key
  added while it is being processed is only marked dirty and queued again by ``done``, so an add
  during processing gives exactly one more run afterwards, however many adds there were.
- **Fair.** Keys are handed out in the order they became ready (FIFO); waiting getters are served in
  the order they called ``get()``.
- **Shutdown.** After ``shut_down()`` adds are ignored and ``get()`` keeps handing out what is queued,
  then raises ``QueueShutDown`` once the queue is empty (workers drain it).
  ``shut_down(discard_queued=True)`` drops what is queued so workers stop after their current item.
  ``await shut_down_with_drain()`` also waits until nothing is being processed.

Delays (the delaying queue): ``add_after(key, d)`` makes ``key`` ready after ``d`` seconds on the
clock (``d <= 0`` adds at once). A key is in the queue once, ready or waiting, as in controller-runtime's
priority queue (the default since v0.20, which upstream's controller runs on): a key already waiting
keeps the *earlier* ready time; a plain ``add`` of a waiting key makes it ready now and its delay is
gone; a delay for a key that is already ready (or re-added while being processed) is absorbed — the
run it is ready for comes first, and that run's outcome sets the next delay. So a reconcile triggered by
an event never leaves behind the timer of an earlier outcome (client-go's classic queue kept it, and it
fired a second, stale run later). Delayed keys are released by ``run()``, a long-lived coroutine the
owner must run (it ends on shutdown; delayed keys not yet ready are dropped then). Every ``add_after``
call counts one retry (``workqueue_retries_total``), as in client-go.

Rate limiting: ``add_rate_limited(key)`` = ``add_after(key, limiter.when(key))``; ``forget(key)`` and
``num_requeues(key)`` go to the limiter. ``done`` and ``forget`` are separate calls.

Not promised: the priority queue's priorities (every key has the same).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from kustomize_controller.runtime.clock import Clock
from kustomize_controller.runtime.ratelimit import ItemExponentialRateLimiter, RateLimiter

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)


class QueueShutDown(Exception):
    """Raised by ``WorkQueue.get`` once the queue is shut down and empty."""


class QueueMetrics(Protocol[K_contra]):
    def add(self, key: K_contra) -> None: ...

    def get(self, key: K_contra) -> None: ...

    def done(self, key: K_contra) -> None: ...

    def retry(self) -> None: ...

    def discard(self, key: K_contra) -> None: ...


class NoopQueueMetrics(QueueMetrics[Hashable]):
    def add(self, key: Hashable) -> None:
        pass

    def get(self, key: Hashable) -> None:
        pass

    def done(self, key: Hashable) -> None:
        pass

    def retry(self) -> None:
        pass

    def discard(self, key: Hashable) -> None:
        pass


class WorkQueue(Generic[K]):
    def __init__(
        self,
        *,
        clock: Clock,
        name: str = "",
        rate_limiter: RateLimiter[K] | None = None,
        metrics: QueueMetrics[K] | None = None,
    ) -> None:
        self.name = name
        self._clock = clock
        self._limiter: RateLimiter[K] = rate_limiter or ItemExponentialRateLimiter()
        self._metrics: QueueMetrics[K] = metrics or NoopQueueMetrics()
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        self._drained: asyncio.Event | None = None
        # delaying queue: heap of (ready_at, seq, key); _waiting[key] is the live entry's ready_at
        self._heap: list[tuple[float, int, K]] = []
        self._waiting: dict[K, float] = {}
        self._seq = itertools.count()
        self._delays_changed = asyncio.Event()

    # ---------------------------------------------------------------------------------- basic queue

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    @property
    def processing(self) -> frozenset[K]:
        return frozenset(self._processing)

    @property
    def waiting(self) -> int:
        """Keys held back by ``add_after`` and not ready yet."""
        return len(self._waiting)

    def add(self, key: K) -> None:
        if self._shutting_down:
            return
        self._waiting.pop(key, None)  # ready now: its delayed entry is gone (the heap skips it)
        if key in self._dirty:
            return
        self._dirty.add(key)
        self._metrics.add(key)
        if key in self._processing:
            return
        self._queue.append(key)
        self._wake_one()

    async def get(self) -> K:
        while not self._queue:
            if self._shutting_down:
                raise QueueShutDown(self.name)
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                # a wake-up handed to a getter that is being cancelled must go to the next one
                if fut.done() and not fut.cancelled() and self._queue:
                    self._wake_one()
                raise
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        self._metrics.get(key)
        return key

    def done(self, key: K) -> None:
        self._metrics.done(key)
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._wake_one()
        elif not self._processing and self._drained is not None:
            self._drained.set()

    def shut_down(self, *, discard_queued: bool = False) -> None:
        self._shutting_down = True
        if discard_queued:
            for key in self._queue:
                self._metrics.discard(key)
            self._queue.clear()
            self._dirty.clear()
        self._delays_changed.set()
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)

    async def shut_down_with_drain(self) -> None:
        self.shut_down()
        if self._processing:
            self._drained = asyncio.Event()
            await self._drained.wait()

    def _wake_one(self) -> None:
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    # ------------------------------------------------------------------------------- delaying queue

    def add_after(self, key: K, delay: float) -> None:
        if self._shutting_down:
            return
        self._metrics.retry()
        if delay <= 0:
            self.add(key)
            return
        if key in self._dirty:
            return  # ready already (or re-added while processing): that run comes first
        ready_at = self._clock.monotonic() + delay
        current = self._waiting.get(key)
        if current is not None and current <= ready_at:
            return
        self._waiting[key] = ready_at
        heapq.heappush(self._heap, (ready_at, next(self._seq), key))
        self._delays_changed.set()

    def ready_at(self, key: K) -> float | None:
        """When a delayed key becomes ready (monotonic clock), or ``None`` when it is not waiting."""
        return self._waiting.get(key)

    def _release_ready(self) -> float | None:
        """Add every due key; return the next ready time, or ``None`` when nothing waits."""
        now = self._clock.monotonic()
        while self._heap:
            ready_at, _, key = self._heap[0]
            if self._waiting.get(key) != ready_at:
                heapq.heappop(self._heap)  # superseded by an earlier entry, already released
                continue
            if ready_at > now:
                return ready_at
            heapq.heappop(self._heap)
            del self._waiting[key]
            self.add(key)
        return None

    async def run(self) -> None:
        """Release delayed keys when they are due, until shutdown. Run it under the queue's owner."""
        while not self._shutting_down:
            self._delays_changed.clear()
            next_ready = self._release_ready()
            if next_ready is None:
                await self._delays_changed.wait()
                continue
            sleeper = asyncio.ensure_future(self._sleep_until(next_ready))
            changed = asyncio.ensure_future(self._delays_changed.wait())
            try:
                await asyncio.wait({sleeper, changed}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                changed.cancel()
        self._heap.clear()
        self._waiting.clear()

    async def _sleep_until(self, deadline: float) -> None:
        # the delay is computed when the sleeper starts, not when it was scheduled, so time that
        # passed in between (a fake clock stepped meanwhile) is not added to the deadline
        await self._clock.sleep(deadline - self._clock.monotonic())

    # --------------------------------------------------------------------------- rate-limited queue

    def add_rate_limited(self, key: K) -> None:
        self.add_after(key, self._limiter.when(key))

    def forget(self, key: K) -> None:
        self._limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return self._limiter.num_requeues(key)
