import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.runtime.ratelimit import ItemExponentialRateLimiter
from kustomize_controller.runtime.workqueue import QueueShutDown, WorkQueue
from tests.unit.loop import complete

KEYS = st.sampled_from(["a", "b", "c", "d"])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), KEYS),
        st.tuples(st.just("get"), st.just("")),
        st.tuples(st.just("done"), st.integers(0, 3)),
        st.tuples(st.just("add_after"), KEYS, st.floats(0, 5)),
        st.tuples(st.just("advance"), st.floats(0, 3)),
    ),
    max_size=60,
)


async def _get_now(q: WorkQueue[str]) -> str:
    return await complete(q.get())


async def _scenario(ops: list[tuple]) -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock=clock, name="t")
    pump = asyncio.create_task(q.run())
    held: list[str] = []  # keys handed out and not done, in hand-out order
    needs_run: set[str] = set()  # keys added (and ready) since their last hand-out
    for op in ops:
        kind = op[0]
        if kind == "add":
            q.add(op[1])
            needs_run.add(op[1])
        elif kind == "add_after":
            q.add_after(op[1], op[2])
        elif kind == "advance":
            await clock.advance(op[1])
        elif kind == "get" and len(q):
            key = await _get_now(q)
            assert key not in held, "a key was handed out twice at once"
            held.append(key)
            needs_run.discard(key)
        elif kind == "done" and held:
            key = held.pop(op[1] % len(held))
            q.done(key)
        # the queue never holds a key twice, nor a key that is being processed
        queued = list(q._queue)
        assert len(queued) == len(set(queued))
        assert not set(queued) & set(held)
        # a key that must run again and is not being processed is queued
        for key in needs_run - set(held):
            assert key in queued
    # shutdown drains: finish everything in flight, release every delay, shut down, and the workers
    # still get every key that needs a run (each once) before QueueShutDown
    await clock.advance(10)
    q.shut_down()
    for key in held:
        q.done(key)
    processed: list[str] = []
    while True:
        try:
            key = await _get_now(q)
        except QueueShutDown:
            break
        processed.append(key)
        q.done(key)
    assert needs_run <= set(processed), "a key added was never run"
    assert len(processed) == len(set(processed)), "a key ran twice although it was added once"
    await pump


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_queue_properties(ops: list[tuple]) -> None:
    asyncio.run(_scenario(ops))


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5))
def test_readd_during_processing_gives_exactly_one_more_run(readds: int) -> None:
    async def scenario() -> None:
        q: WorkQueue[str] = WorkQueue(clock=FakeClock())
        q.add("k")
        assert await q.get() == "k"
        for _ in range(readds):
            q.add("k")
        assert len(q) == 0  # not handed out again while processing
        q.done("k")
        assert await q.get() == "k"
        q.done("k")
        assert len(q) == 0

    asyncio.run(scenario())


async def test_fifo_and_dedup() -> None:
    q: WorkQueue[str] = WorkQueue(clock=FakeClock())
    for k in ["a", "b", "a", "c", "b"]:
        q.add(k)
    assert [await q.get() for _ in range(3)] == ["a", "b", "c"]


async def test_getters_are_woken_in_order() -> None:
    q: WorkQueue[str] = WorkQueue(clock=FakeClock())
    t1 = asyncio.create_task(q.get())
    t2 = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("x")
    q.add("y")
    assert (await t1, await t2) == ("x", "y")


async def test_cancelled_getter_passes_its_wakeup_on() -> None:
    q: WorkQueue[str] = WorkQueue(clock=FakeClock())
    t1 = asyncio.create_task(q.get())
    t2 = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("x")
    t1.cancel()
    assert await complete(t2) == "x"


async def test_shutdown_drains_queued_keys_then_raises() -> None:
    q: WorkQueue[str] = WorkQueue(clock=FakeClock())
    q.add("a")
    q.add("b")
    q.shut_down()
    q.add("c")  # ignored
    assert [await q.get(), await q.get()] == ["a", "b"]
    with pytest.raises(QueueShutDown):
        await q.get()


async def test_shutdown_wakes_blocked_getters() -> None:
    q: WorkQueue[str] = WorkQueue(clock=FakeClock())
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.shut_down()
    with pytest.raises(QueueShutDown):
        await getter


async def test_shutdown_discarding_queued_keys() -> None:
    q: WorkQueue[str] = WorkQueue(clock=FakeClock())
    q.add("a")
    q.add("b")
    assert await q.get() == "a"
    q.add("a")  # dirty while processing
    q.shut_down(discard_queued=True)
    q.done("a")
    with pytest.raises(QueueShutDown):
        await q.get()


async def test_shutdown_with_drain_waits_for_processing() -> None:
    q: WorkQueue[str] = WorkQueue(clock=FakeClock())
    q.add("a")
    await q.get()
    drain = asyncio.create_task(q.shut_down_with_drain())
    await asyncio.sleep(0)
    assert not drain.done()
    q.done("a")
    await complete(drain)


async def test_delayed_adds_become_ready_in_deadline_order() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock=clock)
    pump = asyncio.create_task(q.run())
    q.add_after("late", 3)
    q.add_after("early", 1)
    q.add_after("mid", 2)
    q.add_after("now", 0)
    await asyncio.sleep(0)
    assert list(q._queue) == ["now"]
    await clock.advance(1)
    assert list(q._queue) == ["now", "early"]
    await clock.advance(5)
    assert list(q._queue) == ["now", "early", "mid", "late"]
    q.shut_down()
    await pump


async def test_delayed_add_keeps_the_earlier_deadline() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock=clock)
    pump = asyncio.create_task(q.run())
    q.add_after("k", 10)
    q.add_after("k", 2)
    q.add_after("k", 5)
    assert q.ready_at("k") == clock.monotonic() + 2
    await clock.advance(2)
    assert list(q._queue) == ["k"] and q.waiting == 0
    q.shut_down()
    await pump


async def test_rate_limited_adds_back_off_and_forget_resets() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock=clock, rate_limiter=ItemExponentialRateLimiter(base_delay=1, max_delay=8))
    start = clock.monotonic()
    delays = []
    for _ in range(5):
        q.add_rate_limited("k")
        delays.append(q.ready_at("k") - start)  # type: ignore[operator]
        q._waiting.clear()
        q._heap.clear()
    assert delays == [1, 2, 4, 8, 8]
    assert q.num_requeues("k") == 5
    q.forget("k")
    assert q.num_requeues("k") == 0


async def test_a_plain_add_consumes_the_keys_delay() -> None:
    # controller-runtime's priority queue (upstream's): one entry per key; an event for a key waiting on
    # its requeue makes it ready now, and the old timer is gone (found by the differential run: a dependent
    # woken by its dependency ran again when its --requeue-dependency timer fired)
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock=clock)
    pump = asyncio.create_task(q.run())
    q.add_after("k", 4)
    q.add("k")
    assert q.waiting == 0 and list(q._queue) == ["k"]
    assert await q.get() == "k"
    q.add_after("k", 3600)  # the run's outcome: the next interval
    q.done("k")
    await clock.advance(10)
    assert len(q) == 0 and q.ready_at("k") == clock.monotonic() - 10 + 3600
    q.shut_down()
    await pump


async def test_a_delay_for_a_key_that_is_ready_is_absorbed() -> None:
    # re-added while processing: the run it is ready for comes first, its outcome sets the next delay
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock=clock)
    pump = asyncio.create_task(q.run())
    q.add("k")
    assert await q.get() == "k"
    q.add("k")  # an event while it runs
    q.add_after("k", 5)  # the first run's outcome
    q.done("k")
    assert q.waiting == 0
    assert await q.get() == "k"
    q.done("k")
    await clock.advance(10)
    assert len(q) == 0  # no stale run five seconds later
    q.shut_down()
    await pump
