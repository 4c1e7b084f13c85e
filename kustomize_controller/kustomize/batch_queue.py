"""Grouping the builds that wait for a builder slot, so that one process builds several (:mod:`.batch`).

Contract:

- A build waits for a group to form only in a burst: one that finds a lane and a slot free runs at
  once, alone, unless another build was submitted less than ``BURST`` (1 s) before it *and* ``demand``
  (:class:`Demand`) counts another reconcile holding a worker. Then it takes the free lane and waits
  there for company until ``gather_size`` builds (itself included) are queued or ``gather`` seconds have
  passed since it was submitted (time spent waiting for the lane counts), whichever is first. So a
  change reconciled while no other reconcile holds a worker never waits, however soon after the last
  one it comes (health waits released from their workers do not count), and neither does a lone change
  among no-op reconciles (they build nothing); the builds of a
  cold start or of a new revision, which trickle in while other reconciles fetch and apply, share
  processes instead of starting one each (measured in bench/analysis.md).
- Builds submitted while every lane (``lanes``: at most that many grouped processes at once; the
  builder gives one per CPU the process may use, :mod:`~kustomize_controller.runtime.cpus`) or every
  builder slot is busy queue; when both free, the oldest queued build takes them with up to
  ``max_batch - 1`` of those queued behind it (FIFO), and the next oldest starts waiting for the next.
  So a queued build waits for at most the processes running ahead of it (and a wait for company),
  as it would for a slot. (Lanes, not only slots: with one slot per busy CPU still free, a trickle of
  builds would each start a process of their own; fewer, fuller processes spend less CPU.)
- A group of one is built alone (``alone``); a larger group once by ``together``, which returns each
  member's output or None for an output it does not trust. A member without a trusted output is built
  alone. When ``together`` fails, the group is split in halves and each half is built the same way, down
  to single builds: a member's result is always either a trusted part of a batch or its own build's
  output or error, so one member's error never becomes another's, and delays it by at most the
  failed batches (about log2(max_batch) small builds).
- The whole group is built holding the lane and the one slot its leader took: the number of builder
  processes never exceeds the slots.
- Cancellation: a queued build that is cancelled leaves the queue; a member cancelled while its group
  builds only loses its result. When the leader is cancelled mid-group (shutdown, lost leadership), the
  builder process is killed as any build's is, and the members still waiting go back to the head of
  the queue, where the oldest leads again. Every group runs in the task of the build that leads it; the
  only task started here is the timer of a wait for company, cancelled when the wait ends however it
  ends.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from kustomize_controller.runtime.clock import Clock

T = TypeVar("T")

BURST = 1.0  # seconds: a build submitted this soon after another one may wait for company


@dataclass(eq=False)
class _Member(Generic[T]):
    job: T
    done: asyncio.Future[bytes]
    since: float  # when it was submitted (the clock's monotonic time)
    burst: bool  # another build was submitted less than ``BURST`` before it
    lead: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


Alone = Callable[[T], Awaitable[bytes]]
Together = Callable[[Sequence[T]], Awaitable[Sequence[bytes | None]]]


class Demand(Protocol):
    """How many reconciles hold a worker now, and so may build soon; the application passes the runtime's
    count (:class:`~kustomize_controller.runtime.controller.BusyWorkers`): a reconcile that released its
    worker to wait for health checks is not counted."""

    @property
    def active(self) -> int: ...


class BatchQueue(Generic[T]):
    """Builds of jobs of type ``T``, grouped as the module docstring says."""

    def __init__(
        self,
        *,
        slots: asyncio.Semaphore,
        alone: Alone[T],
        together: Together[T],
        max_batch: int,
        lanes: int,
        gather: float = 0.0,
        gather_size: int | None = None,
        clock: Clock | None = None,
        demand: Demand | None = None,
    ) -> None:
        self._slots = slots
        self._gather = gather if clock is not None else 0.0
        self._clock = clock
        self._max_batch = max(1, max_batch)
        self._gather_size = min(self._max_batch, max(1, gather_size or self._max_batch))
        self._demand = demand
        self._last_submit: float | None = None
        self._filled: asyncio.Future[None] | None = None  # set when a gathering leader's group is full
        self._lanes = asyncio.Semaphore(max(1, lanes))
        self._alone = alone
        self._together = together
        self._queue: collections.deque[_Member[T]] = collections.deque()
        self._leader: _Member[T] | None = None  # the member waiting for a slot to run the next group
        self.groups = 0  # processes that built more than one job (for tests and the bench)
        self.together = 0  # jobs served by such a process (the others were built alone)

    async def submit(self, job: T) -> bytes:
        """Build ``job``: its output, or its own build's error."""
        now = self._clock.monotonic() if self._clock is not None else 0.0
        burst = self._last_submit is not None and now - self._last_submit < BURST
        self._last_submit = now
        member = _Member(job, asyncio.get_running_loop().create_future(), now, burst)
        self._queue.append(member)
        if self._filled is not None and not self._filled.done() and len(self._queue) >= self._gather_size:
            self._filled.set_result(None)
        self._elect()
        try:
            while not member.done.done():
                await asyncio.wait((member.done, member.lead), return_when=asyncio.FIRST_COMPLETED)
                if not member.done.done():
                    member.lead = asyncio.get_running_loop().create_future()
                    await self._lead(member)
            return member.done.result()
        finally:
            self._forget(member)

    def _elect(self) -> None:
        if self._leader is None and self._queue:
            self._leader = self._queue[0]
            self._leader.lead.set_result(None)

    def _forget(self, member: _Member[T]) -> None:
        if not member.done.done():
            member.done.cancel()  # a group still building drops its result
        if member in self._queue:
            self._queue.remove(member)
        if self._leader is member:
            self._leader = None
            self._elect()

    async def _lead(self, member: _Member[T]) -> None:
        group: list[_Member[T]] = []
        try:
            async with self._lanes:
                await self._gather_behind(member)
                async with self._slots:
                    self._leader = None
                    group = self._take(member)
                    self._elect()
                    await self._build(group)
        finally:
            # cancelled mid-group: whoever still waits goes back to the head of the queue
            for other in reversed(group):
                if other is not member and not other.done.done():
                    self._queue.appendleft(other)
            self._elect()

    async def _gather_behind(self, member: _Member[T]) -> None:
        """In a burst while other reconciles hold workers, let the group fill: wait (holding the lane) until
        ``gather_size`` builds are queued or ``gather`` has passed since ``member`` was submitted."""
        if not member.burst or self._demand is None or self._demand.active < 2 or self._clock is None:
            return
        left = member.since + self._gather - self._clock.monotonic()
        if left <= 0 or len(self._queue) >= self._gather_size:
            return
        self._filled = asyncio.get_running_loop().create_future()
        timer = asyncio.ensure_future(self._clock.sleep(left))
        try:
            await asyncio.wait((self._filled, timer), return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            self._filled = None

    def _take(self, member: _Member[T]) -> list[_Member[T]]:
        group = [member]
        self._queue.remove(member)
        while self._queue and len(group) < self._max_batch:
            group.append(self._queue.popleft())
        return group

    async def _build(self, group: list[_Member[T]]) -> None:
        live = [m for m in group if not m.done.done()]
        if not live:
            return
        if len(live) == 1:
            await self._build_alone(live[0])
            return
        try:
            parts = await self._together([m.job for m in live])
        except Exception:
            middle = len(live) // 2
            await self._build(live[:middle])
            await self._build(live[middle:])
            return
        self.groups += 1
        for m, part in zip(live, parts, strict=True):
            if part is not None and not m.done.done():
                m.done.set_result(part)
                self.together += 1
        for m in live:
            if not m.done.done():
                await self._build_alone(m)

    async def _build_alone(self, member: _Member[T]) -> None:
        try:
            output = await self._alone(member.job)
        except Exception as err:
            if not member.done.done():
                member.done.set_exception(err)
            return
        if not member.done.done():
            member.done.set_result(output)


__all__ = ["BatchQueue", "Demand"]
