import random

import pytest

from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.runtime.ratelimit import ItemExponentialRateLimiter, JitteredBackoff


def test_flux_defaults_750ms_doubling_to_15_minutes() -> None:
    limiter: ItemExponentialRateLimiter[str] = ItemExponentialRateLimiter()
    delays = [limiter.when("k") for _ in range(14)]
    assert delays[:5] == [0.75, 1.5, 3.0, 6.0, 12.0]
    assert delays[10] == 768.0
    assert delays[11:] == [900.0, 900.0, 900.0]


def test_failures_are_per_item_and_forget_resets() -> None:
    limiter: ItemExponentialRateLimiter[str] = ItemExponentialRateLimiter(base_delay=1, max_delay=100)
    limiter.when("a")
    limiter.when("a")
    assert limiter.when("b") == 1
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert limiter.when("a") == 1


def test_huge_failure_counts_do_not_overflow() -> None:
    limiter: ItemExponentialRateLimiter[str] = ItemExponentialRateLimiter(base_delay=1, max_delay=60)
    for _ in range(2000):
        d = limiter.when("k")
    assert d == 60


def test_invalid_delays_rejected() -> None:
    with pytest.raises(ValueError):
        ItemExponentialRateLimiter(base_delay=10, max_delay=1)


async def test_reflector_backoff_doubles_with_jitter_caps_and_resets() -> None:
    clock = FakeClock()
    backoff = JitteredBackoff(clock=clock, rng=random.Random(1))
    delays = [backoff.next() for _ in range(8)]
    bases = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    for d, base in zip(delays, bases, strict=True):
        assert base <= d < 2 * base
    await clock.advance(121)
    assert 0.8 <= backoff.next() < 1.6
