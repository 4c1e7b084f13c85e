import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kustomize_controller.kube.ratelimit import TokenBucket
from kustomize_controller.runtime.clock import FakeClock


async def test_burst_is_free_then_qps_paces() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=2, burst=3, clock=clock)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    # the 4th and 5th wait 0.5 s and 1 s: tokens come back at 2 per second, in call order
    assert bucket.reserve() == pytest.approx(0.5)
    assert bucket.reserve() == pytest.approx(1.0)


async def test_tokens_refill_up_to_burst_only() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=2, clock=clock)
    bucket.reserve()
    bucket.reserve()
    await clock.advance(100)
    assert bucket.try_take() and bucket.try_take()
    assert not bucket.try_take()


async def test_wait_sleeps_on_the_clock() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=1, burst=1, clock=clock)
    await bucket.wait()
    task = asyncio.create_task(bucket.wait())
    await asyncio.sleep(0)
    assert not task.done()
    await clock.advance(0.5)
    assert not task.done()
    await clock.advance(0.5)
    assert task.done()


async def test_cancelled_waiter_returns_its_token() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=1, burst=1, clock=clock)
    bucket.reserve()
    task = asyncio.create_task(bucket.wait())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert bucket.reserve() == pytest.approx(1.0)  # not 2.0: the cancelled reservation was refunded


def test_minus_one_disables() -> None:
    bucket = TokenBucket(qps=-1, burst=-1, clock=FakeClock())
    assert bucket.disabled
    assert all(bucket.reserve() == 0.0 for _ in range(10_000))


def test_zero_qps_is_rejected() -> None:
    with pytest.raises(ValueError, match="qps"):
        TokenBucket(qps=0, burst=10, clock=FakeClock())


@settings(max_examples=200, deadline=None)
@given(
    qps=st.floats(0.5, 100),
    burst=st.integers(1, 50),
    steps=st.lists(st.tuples(st.integers(0, 20), st.floats(0, 5)), max_size=30),
)
def test_never_more_than_burst_plus_refill(qps: float, burst: int, steps: list[tuple[int, float]]) -> None:
    """However calls and time interleave, requests released by a time T never exceed
    burst + qps × T (the bucket's promise), and each waits exactly until its token exists."""

    async def scenario() -> None:
        clock = FakeClock()
        bucket = TokenBucket(qps=qps, burst=burst, clock=clock)
        start = clock.monotonic()
        release_times: list[float] = []
        for calls, advance in steps:
            for _ in range(calls):
                release_times.append(clock.monotonic() + bucket.reserve())
            await clock.advance(advance)
        for i, t in enumerate(sorted(release_times)):
            assert i + 1 <= burst + qps * (t - start) + 1e-6

    asyncio.run(scenario())
