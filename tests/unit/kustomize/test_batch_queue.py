"""Grouping queued builds: no wait when a slot is free, FIFO groups under load, bisection on failure,
fallback for untrusted parts, cancellation at every stage."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from kustomize_controller.kustomize.batch_queue import BURST, BatchQueue
from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.runtime.controller import BusyWorkers


class Fake:
    """``alone``/``together`` recording every process they stand for; a job "bad" fails, a job
    "untrusted" gets no trusted part, and ``gate`` (when set) holds every process until opened."""

    def __init__(self) -> None:
        self.processes: list[list[str]] = []
        self.gate: asyncio.Event | None = None
        self.gates: dict[str, asyncio.Event] = {}  # by a process's first job: held until set
        self.running = 0
        self._started: dict[str, asyncio.Event] = {}

    def started(self, first_job: str) -> asyncio.Event:
        """Set once a process whose first job is ``first_job`` runs."""
        return self._started.setdefault(first_job, asyncio.Event())

    async def _process(self, jobs: list[str]) -> None:
        self.processes.append(jobs)
        self.started(jobs[0]).set()
        self.running += 1
        try:
            if self.gate is not None:
                await self.gate.wait()
            if jobs[0] in self.gates:
                await self.gates[jobs[0]].wait()
            await asyncio.sleep(0)
        finally:
            self.running -= 1

    async def alone(self, job: str) -> bytes:
        await self._process([job])
        if job.startswith("bad"):
            raise ValueError(f"{job} is broken")
        return job.encode()

    async def together(self, jobs: Sequence[str]) -> list[bytes | None]:
        await self._process(list(jobs))
        if any(j.startswith("bad") for j in jobs):
            raise ValueError("the batch failed")
        return [None if j == "untrusted" else j.encode() for j in jobs]


def queue(fake: Fake, *, slots: int = 1, max_batch: int = 8) -> BatchQueue[str]:
    # a lane per slot: only the slots bind (the lanes' own test passes fewer)
    return BatchQueue(slots=asyncio.Semaphore(slots), alone=fake.alone, together=fake.together, max_batch=max_batch,
                      lanes=slots)


async def busy(q: BatchQueue[str], fake: Fake, job: str = "hold") -> asyncio.Future[bytes]:
    """Submit ``job`` and return once its process runs (held by ``fake.gate``, which this sets up)."""
    fake.gate = asyncio.Event()
    task = asyncio.ensure_future(q.submit(job))
    await fake.started(job).wait()
    return task


async def submit_behind(q: BatchQueue[str], jobs: Sequence[str]) -> list[asyncio.Future[bytes]]:
    tasks = [asyncio.ensure_future(q.submit(j)) for j in jobs]
    await asyncio.sleep(0)
    return tasks


async def test_a_free_slot_builds_at_once_alone() -> None:
    fake = Fake()
    q = queue(fake)
    assert await q.submit("a") == b"a"
    assert await q.submit("b") == b"b"
    assert fake.processes == [["a"], ["b"]] and q.groups == 0


async def test_builds_queued_behind_a_busy_slot_run_together_in_fifo_groups() -> None:
    fake = Fake()
    q = queue(fake, max_batch=3)
    first = await busy(q, fake, "first")
    rest = await submit_behind(q, "abcde")
    assert fake.gate is not None
    fake.gate.set()
    assert await first == b"first"
    assert [await t for t in rest] == [j.encode() for j in "abcde"]
    assert fake.processes == [["first"], ["a", "b", "c"], ["d", "e"]]
    assert q.groups == 2 and q.together == 5


async def test_slots_bound_the_processes() -> None:
    fake = Fake()
    fake.gate = asyncio.Event()
    q = queue(fake, slots=2, max_batch=2)
    tasks = [asyncio.ensure_future(q.submit(str(i))) for i in range(9)]
    for _ in range(20):
        await asyncio.sleep(0)
        assert fake.running <= 2
    fake.gate.set()
    assert [await t for t in tasks] == [str(i).encode() for i in range(9)]
    assert all(len(p) <= 2 for p in fake.processes)


async def test_a_failed_batch_is_bisected_down_to_the_broken_build() -> None:
    fake = Fake()
    q = queue(fake, max_batch=8)
    hold = await busy(q, fake)
    jobs = ["a", "b", "c", "bad", "d", "untrusted"]
    tasks = await submit_behind(q, jobs)
    assert fake.gate is not None
    fake.gate.set()
    await hold
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert [r if isinstance(r, bytes) else str(r) for r in results] == [
        b"a", b"b", b"c", "bad is broken", b"d", b"untrusted"]
    # the whole group, then its halves; the bad half again in halves; the broken one and the
    # untrusted one alone
    assert fake.processes[1:] == [
        jobs, ["a", "b", "c"], ["bad", "d", "untrusted"], ["bad"], ["d", "untrusted"], ["untrusted"]]


async def test_a_cancelled_queued_build_leaves_the_queue() -> None:
    fake = Fake()
    q = queue(fake)
    hold = await busy(q, fake)
    a, b, c = await submit_behind(q, "abc")
    assert fake.gate is not None
    a.cancel()  # the elected leader
    b.cancel()
    await asyncio.sleep(0)
    fake.gate.set()
    assert await hold == b"hold" and await c == b"c"
    assert fake.processes == [["hold"], ["c"]]
    for t in (a, b):
        with pytest.raises(asyncio.CancelledError):
            await t


async def test_a_leader_cancelled_mid_group_hands_its_members_back() -> None:
    fake = Fake()
    q = queue(fake)
    hold = await busy(q, fake)
    fake.gates["leader"] = asyncio.Event()  # the group's process is held, then its leader cancelled
    leader, a, b = await submit_behind(q, ("leader", "a", "b"))
    assert fake.gate is not None
    fake.gate.set()
    await hold
    await fake.started("leader").wait()
    assert fake.processes[-1] == ["leader", "a", "b"]
    leader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leader
    assert fake.running == 0  # the process was stopped with its leader
    assert await a == b"a" and await b == b"b"
    assert fake.processes[-1] == ["a", "b"]


async def test_a_member_cancelled_mid_group_only_loses_its_result() -> None:
    fake = Fake()
    q = queue(fake)
    hold = await busy(q, fake)
    fake.gates["a"] = asyncio.Event()
    tasks = await submit_behind(q, "ab")
    assert fake.gate is not None
    fake.gate.set()
    await hold
    await fake.started("a").wait()
    assert fake.processes[-1] == ["a", "b"]
    tasks[1].cancel()
    await asyncio.sleep(0)
    fake.gates["a"].set()
    assert await tasks[0] == b"a"
    with pytest.raises(asyncio.CancelledError):
        await tasks[1]
    assert len(fake.processes) == 2


async def test_lanes_bound_the_grouped_processes_so_that_groups_fill() -> None:
    fake = Fake()
    q = BatchQueue(slots=asyncio.Semaphore(4), alone=fake.alone, together=fake.together, max_batch=8, lanes=1)
    first = await busy(q, fake, "first")
    rest = await submit_behind(q, "abc")
    assert fake.gate is not None
    for _ in range(5):
        await asyncio.sleep(0)
    assert fake.running == 1  # slots are free, the lane is not: the others queue
    fake.gate.set()
    await first
    assert [await t for t in rest] == [b"a", b"b", b"c"]
    assert fake.processes == [["first"], ["a", "b", "c"]]


# --- waiting for company in a burst while other reconciles hold workers (``gather``, ``demand``) ------


def gathering(fake: Fake, clock: FakeClock, demand: BusyWorkers, *, gather: float = 0.1, lanes: int = 2,
              gather_size: int | None = None) -> BatchQueue[str]:
    return BatchQueue(slots=asyncio.Semaphore(2), alone=fake.alone, together=fake.together, max_batch=8,
                      lanes=lanes, gather=gather, gather_size=gather_size, clock=clock, demand=demand)


async def spin(times: int = 10) -> None:
    for _ in range(times):
        await asyncio.sleep(0)


def working(n: int) -> BusyWorkers:
    """``n`` reconciles holding a worker."""
    busy = BusyWorkers()
    busy.active = n
    return busy


async def test_a_build_with_no_other_reconcile_running_never_waits_however_soon_it_comes() -> None:
    fake, clock, demand = Fake(), FakeClock(), working(1)  # only the reconcile that builds
    q = gathering(fake, clock, demand)
    assert await q.submit("a") == b"a"
    assert await q.submit("b") == b"b"  # right after a, but no other reconcile runs: the clock never moves
    assert fake.processes == [["a"], ["b"]] and clock.pending_sleepers == 0


async def test_a_build_long_after_the_last_one_never_waits() -> None:
    fake, clock, demand = Fake(), FakeClock(), working(5)
    q = gathering(fake, clock, demand)
    assert await q.submit("a") == b"a"  # the first of a burst: nothing came before it
    await clock.advance(BURST)
    assert await q.submit("b") == b"b"  # others run, but the last build was a second ago: no burst
    assert fake.processes == [["a"], ["b"]] and clock.pending_sleepers == 0


async def test_in_a_burst_a_free_lane_waits_for_its_group_until_the_window_closes() -> None:
    fake, clock, demand = Fake(), FakeClock(), working(3)
    q = gathering(fake, clock, demand)
    assert await q.submit("a") == b"a"
    await clock.advance(0.5)
    b = asyncio.ensure_future(q.submit("b"))  # half a second after a, others running: it waits for company
    await spin()
    assert len(fake.processes) == 1
    await clock.advance(0.03)
    c, d = await submit_behind(q, "cd")
    await spin()
    assert len(fake.processes) == 1
    await clock.advance(0.07)  # 100 ms after b was submitted
    assert [await t for t in (b, c, d)] == [b"b", b"c", b"d"]
    assert fake.processes == [["a"], ["b", "c", "d"]] and clock.pending_sleepers == 0


async def test_once_the_others_give_their_workers_back_a_burst_no_longer_waits() -> None:
    fake, clock, demand = Fake(), FakeClock(), working(3)
    q = gathering(fake, clock, demand)
    assert await q.submit("a") == b"a"
    demand.active = 1  # the other two released their workers to wait for health checks
    assert await q.submit("b") == b"b"  # right after a, yet alone and at once
    assert fake.processes == [["a"], ["b"]] and clock.pending_sleepers == 0


async def test_the_wait_ends_once_gather_size_builds_are_queued() -> None:
    fake, clock, demand = Fake(), FakeClock(), working(3)
    q = gathering(fake, clock, demand, gather_size=3)
    assert await q.submit("a") == b"a"
    tasks = await submit_behind(q, "bcd")
    assert [await t for t in tasks] == [b"b", b"c", b"d"]  # the clock never moved
    assert fake.processes == [["a"], ["b", "c", "d"]] and clock.pending_sleepers == 0


async def test_time_spent_waiting_for_a_lane_counts_towards_the_window() -> None:
    fake, clock, demand = Fake(), FakeClock(), working(3)
    q = gathering(fake, clock, demand, lanes=1)
    first = await busy(q, fake, "first")  # the first of the burst runs at once
    rest = await submit_behind(q, "ab")
    await clock.advance(0.2)  # the lane stays busy for longer than the window
    assert fake.gate is not None
    fake.gate.set()
    await first
    assert [await t for t in rest] == [b"a", b"b"]  # no further wait once the lane was free
    assert fake.processes == [["first"], ["a", "b"]] and clock.pending_sleepers == 0


async def test_a_waiting_leader_cancelled_hands_the_lead_on() -> None:
    fake, clock, demand = Fake(), FakeClock(), working(3)
    q = gathering(fake, clock, demand)
    assert await q.submit("a") == b"a"
    leader = asyncio.ensure_future(q.submit("leader"))
    await spin()
    other = asyncio.ensure_future(q.submit("other"))
    await spin()
    leader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leader
    assert len(fake.processes) == 1  # the new leader waits out its own window
    await clock.advance(0.1)
    assert await other == b"other"
    assert fake.processes == [["a"], ["other"]] and clock.pending_sleepers == 0
