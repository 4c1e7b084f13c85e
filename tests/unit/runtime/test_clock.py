import asyncio
from datetime import timedelta

import pytest

from kustomize_controller.runtime.clock import FakeClock, RealClock


async def test_fake_clock_wakes_sleepers_in_deadline_order() -> None:
    clock = FakeClock()
    woke: list[str] = []

    async def sleeper(name: str, delay: float) -> None:
        await clock.sleep(delay)
        woke.append(name)

    tasks = [asyncio.create_task(sleeper(n, d)) for n, d in [("c", 3), ("a", 1), ("b", 2)]]
    await asyncio.sleep(0)
    assert clock.pending_sleepers == 3
    await clock.advance(1.5)
    assert woke == ["a"]
    await clock.advance(10)
    assert woke == ["a", "b", "c"]
    await asyncio.gather(*tasks)


async def test_fake_clock_wall_time_follows_monotonic() -> None:
    clock = FakeClock()
    start = clock.now()
    await clock.advance(90)
    assert clock.now() - start == timedelta(seconds=90)


async def test_cancelled_sleeper_is_not_pending() -> None:
    clock = FakeClock()
    task = asyncio.create_task(clock.sleep(5))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0)
    assert clock.pending_sleepers == 0


async def test_real_clock_is_utc_and_sleeps() -> None:
    clock = RealClock()
    assert clock.now().utcoffset() == timedelta(0)
    before = clock.monotonic()
    await clock.sleep(0)
    assert clock.monotonic() >= before


async def test_sleep_unless_returns_when_the_event_is_set_or_the_time_has_passed() -> None:
    from kustomize_controller.runtime.clock import sleep_unless

    clock, event = FakeClock(), asyncio.Event()
    waiting = asyncio.create_task(sleep_unless(clock, 5, event))
    for _ in range(5):  # let it start its sleep
        await asyncio.sleep(0)
    assert clock.pending_sleepers == 1
    event.set()
    assert await waiting is True
    assert clock.pending_sleepers == 0  # its sleeper was cancelled, not left behind
    assert await sleep_unless(clock, 5, event) is True  # already set: no wait at all
    event.clear()
    waiting = asyncio.create_task(sleep_unless(clock, 5, event))
    for _ in range(5):  # let it start its sleep
        await asyncio.sleep(0)
    await clock.advance(5)
    assert await waiting is False


async def test_within_returns_the_result_or_cancels_the_work_at_the_deadline() -> None:
    from kustomize_controller.runtime.clock import within

    clock, gate = FakeClock(), asyncio.Event()
    cancelled: list[bool] = []

    async def work() -> str:
        try:
            await gate.wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "done"

    waiting = asyncio.create_task(within(clock, 5, work()))
    for _ in range(5):
        await asyncio.sleep(0)
    gate.set()
    assert await waiting == "done"
    assert clock.pending_sleepers == 0 and not cancelled
    gate.clear()
    waiting = asyncio.create_task(within(clock, 5, work()))
    for _ in range(5):
        await asyncio.sleep(0)
    await clock.advance(4.5)
    assert not waiting.done()
    await clock.advance(0.5)
    with pytest.raises(TimeoutError, match="not done within 5s"):
        await waiting
    assert cancelled == [True]  # the work was cancelled and waited for: nothing left running
