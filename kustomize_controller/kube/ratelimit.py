"""Client-side token bucket for API requests (client-go's ``flowcontrol.NewTokenBucketRateLimiter``).

Contract:
- ``qps`` tokens are added per second up to ``burst``; the bucket starts full. ``await wait()``
  takes one token, sleeping on the clock until it is available. Waiters are served in call order
  (each reserves the next token when it calls, so later callers queue behind earlier ones).
- ``qps < 0`` or ``burst < 0`` (the flags' ``-1``) disables limiting: ``wait()`` returns at once.
- A waiter cancelled while sleeping gives its token back.
- ``reconfigure(qps, burst)`` changes the limits in place (every client sharing the bucket follows;
  the start-up priority-and-fairness probe uses it), starting again from a full bucket.

Not promised: fairness between clients derived from one another; they share one bucket on purpose
(one process, one budget, as in client-go where a rest.Config has one limiter).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Literal, Protocol

Mode = Literal["priority-and-fairness", "client-side", "none"]


@dataclass(frozen=True)
class Throttling:
    """What a client does before each request: ``mode`` and the bucket's limits (−1: no bucket).
    Decided by ``kube.flowcontrol`` and handed to the client (``KubeClient.set_throttling``)."""

    mode: Mode
    qps: float
    burst: int
    probe_error: str = ""  # why the probe found no answer (the flags then apply)


class MonotonicClock(Protocol):
    """The part of ``runtime.clock.Clock`` the kube layer needs (kept structural: kube sits below
    runtime and cannot import it)."""

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Default clock of the kube layer: the process's monotonic time and ``asyncio.sleep``."""

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class TokenBucket:
    def __init__(self, *, qps: float, burst: int, clock: MonotonicClock | None = None) -> None:
        self._clock: MonotonicClock = clock or SystemClock()
        self.reconfigure(qps=qps, burst=burst)

    def reconfigure(self, *, qps: float, burst: int) -> None:
        disabled = qps < 0 or burst < 0
        if not disabled and qps == 0:
            raise ValueError("kube API qps must be positive, or -1 to disable client-side limiting")
        self.disabled = disabled
        self.qps = float(qps)
        self.burst = max(1, int(burst))
        self._tokens = float(self.burst)
        self._last = self._clock.monotonic()

    def _refill(self) -> None:
        now = self._clock.monotonic()
        elapsed = now - self._last
        self._last = now
        if elapsed > 0:
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)

    def reserve(self) -> float:
        """Take a token now and return how long the caller must wait before using it."""
        if self.disabled:
            return 0.0
        self._refill()
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.qps

    def try_take(self) -> bool:
        """Take a token only if one is available now."""
        if self.disabled:
            return True
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    async def wait(self) -> None:
        delay = self.reserve()
        if delay <= 0:
            return
        try:
            await self._clock.sleep(delay)
        except asyncio.CancelledError:
            self._tokens += 1.0
            raise
