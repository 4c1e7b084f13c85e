"""A controller clock that runs at real speed and that a test moves forward at once.

``JumpClock`` is the real clock plus an offset: requests, watches and waits go on as in production,
and ``jump(seconds)`` makes that much time pass in an instant — ``now()`` and ``monotonic()`` move
forward, and every sleeper whose deadline the jump passes wakes (the others sleep on to their
shifted deadline). A test of something that happens at a time of day (a sync window closing) jumps
to it instead of waiting for the wall clock, so a loaded machine cannot make it miss a state.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta


class JumpClock:
    def __init__(self) -> None:
        self._offset = 0.0
        self._waiters: set[asyncio.Future[None]] = set()

    def monotonic(self) -> float:
        return time.monotonic() + self._offset

    def now(self) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=self._offset)

    async def sleep(self, seconds: float) -> None:
        deadline = self.monotonic() + max(0.0, seconds)
        loop = asyncio.get_running_loop()
        while (remaining := deadline - self.monotonic()) > 0:
            waiter: asyncio.Future[None] = loop.create_future()
            timer = loop.call_later(remaining, _wake, waiter)
            self._waiters.add(waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiters.discard(waiter)
        await asyncio.sleep(0)

    def jump(self, seconds: float) -> None:
        """Move time forward by ``seconds`` now; sleepers re-check their deadline."""
        self._offset += seconds
        for waiter in list(self._waiters):
            _wake(waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
