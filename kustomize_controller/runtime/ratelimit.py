"""Retry delays: the per-item exponential limiter of the workqueue and the reflector's backoff.

``ItemExponentialRateLimiter`` (client-go ``ItemExponentialFailureRateLimiter``, Flux defaults):
``when(key)`` returns ``base × 2^failures(key)`` capped at ``max_delay`` and then counts one more
failure; ``forget(key)`` clears the count; ``num_requeues(key)`` reads it. Flux sets base 750 ms and
max 15 min (``--min-retry-delay`` / ``--max-retry-delay``); there is no shared token bucket.

``JitteredBackoff`` (client-go ``wait.Backoff`` + ``NewExponentialBackoffManager``, as the reflector
uses it): each ``next()`` returns ``d + rand·jitter·d`` and doubles ``d`` up to ``cap``; after
``reset_after`` seconds without a ``next()`` call it starts again from ``initial``.

Not promised: thread safety (one event loop).
"""

from __future__ import annotations

import random
from collections.abc import Hashable
from typing import Protocol, TypeVar

from kustomize_controller.runtime.clock import Clock

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)

DEFAULT_MIN_RETRY_DELAY = 0.75
DEFAULT_MAX_RETRY_DELAY = 15 * 60.0


class RateLimiter(Protocol[K_contra]):
    def when(self, key: K_contra) -> float: ...

    def forget(self, key: K_contra) -> None: ...

    def num_requeues(self, key: K_contra) -> int: ...


class ItemExponentialRateLimiter(RateLimiter[K]):
    def __init__(
        self, *, base_delay: float = DEFAULT_MIN_RETRY_DELAY, max_delay: float = DEFAULT_MAX_RETRY_DELAY
    ) -> None:
        if base_delay <= 0 or max_delay < base_delay:
            raise ValueError(f"retry delays must satisfy 0 < min ({base_delay}) <= max ({max_delay})")
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[K, int] = {}

    def when(self, key: K) -> float:
        exp = self._failures.get(key, 0)
        self._failures[key] = exp + 1
        # 2^exp overflows float beyond ~1024; anything past 63 doublings is far above any cap
        if exp > 63:
            return self.max_delay
        return min(self.base_delay * float(2**exp), self.max_delay)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)


class JitteredBackoff:
    def __init__(
        self,
        *,
        clock: Clock,
        initial: float = 0.8,
        factor: float = 2.0,
        jitter: float = 1.0,
        cap: float = 30.0,
        reset_after: float = 120.0,
        rng: random.Random | None = None,
    ) -> None:
        self._clock = clock
        self.initial = initial
        self.factor = factor
        self.jitter = jitter
        self.cap = cap
        self.reset_after = reset_after
        self._rng = rng or random.Random()
        self._current = initial
        self._last: float | None = None

    def next(self) -> float:
        now = self._clock.monotonic()
        if self._last is not None and now - self._last >= self.reset_after:
            self._current = self.initial
        self._last = now
        base = self._current
        self._current = min(self._current * self.factor, self.cap)
        return base + self._rng.random() * self.jitter * base

    def reset(self) -> None:
        self._current = self.initial
        self._last = None
