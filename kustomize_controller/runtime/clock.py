"""The one injectable clock: every delay, timeout and timestamp goes through it.

Contract:
- ``monotonic()`` never goes backwards; use it for durations and deadlines.
- ``now()`` is wall-clock UTC; use it only for timestamps written to the API.
- ``sleep(seconds)`` suspends the caller; it is cancellable like ``asyncio.sleep`` and returns
  early only by cancellation. ``sleep_unless(clock, seconds, event)`` also returns (True) as soon as
  ``event`` is set; ``within(clock, seconds, awaitable)`` is ``asyncio.timeout`` on the clock.

``RealClock`` is backed by the event loop. ``FakeClock`` lets tests step time: sleepers wake in
deadline order when ``advance()`` moves time past their deadline; nothing else moves time.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    """The production clock: the event loop's monotonic time and the system's UTC wall time."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that moves only when told to. Sleepers are woken by ``advance``."""

    def __init__(self, *, start: datetime | None = None, monotonic_start: float = 1000.0) -> None:
        self._wall_start = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._mono_start = monotonic_start
        self._mono = monotonic_start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self._mono

    def now(self) -> datetime:
        return self._wall_start + timedelta(seconds=self._mono - self._mono_start)

    @property
    def pending_sleepers(self) -> int:
        """Sleepers not yet woken and not cancelled."""
        return sum(1 for _, _, fut in self._sleepers if not fut.done())

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._mono + seconds, next(self._seq), fut))
        await fut

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking every sleeper whose deadline is reached, in deadline order.

        Yields to the loop after each wake-up so that woken tasks run (and may sleep again within
        the advanced window) before time moves on.
        """
        target = self._mono + seconds
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, fut = heapq.heappop(self._sleepers)
            self._mono = max(self._mono, deadline)
            if not fut.done():
                fut.set_result(None)
            for _ in range(5):
                await asyncio.sleep(0)
        self._mono = target
        for _ in range(5):
            await asyncio.sleep(0)


async def within(clock: Clock, seconds: float, awaitable: Awaitable[T]) -> T:
    """The result of ``awaitable``, or ``TimeoutError`` when ``seconds`` pass on ``clock`` first: it is then
    cancelled and waited for (nothing outlives the call). A result ready at the deadline wins."""
    work = asyncio.ensure_future(awaitable)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait((work, timer), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (work, timer):
            task.cancel()
        await asyncio.gather(work, timer, return_exceptions=True)
    if work.cancelled():
        raise TimeoutError(f"not done within {seconds:g}s")
    return work.result()


async def sleep_unless(clock: Clock, seconds: float, event: asyncio.Event) -> bool:
    """Sleep ``seconds`` on ``clock`` unless ``event`` is (or becomes) set first; True when it was."""
    if event.is_set():
        return True
    with contextlib.suppress(TimeoutError):
        await within(clock, seconds, event.wait())
    return event.is_set()
