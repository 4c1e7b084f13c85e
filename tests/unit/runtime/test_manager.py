import asyncio

import pytest

from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.runtime.controller import Controller, Request, Result
from kustomize_controller.runtime.leader import LeaderElectionConfig
from kustomize_controller.runtime.manager import Manager, ManagerOptions, parse_bind_address
from tests.unit.loop import settle, until
from tests.unit.runtime.fakeapi import FakeApi

NO_HTTP = {"metrics_addr": "0", "health_addr": "0"}


class Blocking:
    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started = asyncio.Event()
        self.finished = 0
        self.cancelled = 0

    async def reconcile(self, request: Request) -> Result:
        self.started.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        self.finished += 1
        return Result()


def build(clock: FakeClock, *, grace: float = 30, election: LeaderElectionConfig | None = None):
    api = FakeApi()
    mgr = Manager(
        client=api.client(),
        clock=clock,
        options=ManagerOptions(**NO_HTTP, graceful_shutdown_timeout=grace, leader_election=election),
    )
    rec = Blocking()
    ctrl = Controller(name="t", reconciler=rec, clock=clock, metrics=mgr.metrics, concurrency=1)
    mgr.add_controller(ctrl)
    return api, mgr, ctrl, rec


async def test_stop_cancels_in_flight_reconciles_at_once() -> None:
    # upstream cancels the reconcile context when the manager stops: a reconcile waiting on anything
    # (here a gate nobody opens) must not hold the process for the grace period
    clock = FakeClock()
    _, mgr, ctrl, rec = build(clock)
    run = asyncio.create_task(mgr.run(handle_signals=False))
    ctrl.queue.add(Request("ns", "a"))
    ctrl.queue.add(Request("ns", "b"))
    await until(rec.started.is_set, what="reconcile of a started")
    mgr.stop()
    await until(run.done, what="manager stopped")  # the fake clock never moved: no grace period waited
    assert run.result() == 0
    assert rec.finished == 0 and rec.cancelled == 1  # b was queued, not started: dropped


class Stubborn(Blocking):
    """A reconcile whose cleanup outlives the cancellation."""

    async def reconcile(self, request: Request) -> Result:
        self.started.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            await asyncio.Event().wait()  # cleanup that never ends (until cancelled again)
        return Result()


async def test_grace_period_bounds_the_cleanup_of_cancelled_reconciles() -> None:
    clock = FakeClock()
    _, mgr, ctrl, _ = build(clock, grace=10)
    rec = Stubborn()
    ctrl.reconciler = rec
    run = asyncio.create_task(mgr.run(handle_signals=False))
    ctrl.queue.add(Request("ns", "a"))
    await until(rec.started.is_set, what="reconcile started")
    assert clock.pending_sleepers == 0
    mgr.stop()
    await until(lambda: rec.cancelled == 1 and clock.pending_sleepers == 1, what="cancelled, grace timer started")
    await clock.advance(9)
    await settle()
    assert not run.done()
    await clock.advance(1)
    await until(run.done, what="manager stopped at the end of the grace period")
    assert run.result() == 0


async def test_second_stop_skips_the_grace_period() -> None:
    clock = FakeClock()
    _, mgr, ctrl, rec = build(clock, grace=1000)
    run = asyncio.create_task(mgr.run(handle_signals=False))
    ctrl.queue.add(Request("ns", "a"))
    await until(rec.started.is_set, what="reconcile started")
    mgr.stop()
    mgr.stop()
    await until(run.done, what="manager stopped")  # the fake clock never moved
    assert run.result() == 0
    assert rec.cancelled == 1


async def test_workers_start_only_when_leading_and_stop_releases() -> None:
    clock = FakeClock()
    election = LeaderElectionConfig(
        name="lock", namespace="ns", identity="me", lease_duration=15, renew_deadline=10, retry_period=2
    )
    api, mgr, ctrl, rec = build(clock, election=election)
    other = {"holderIdentity": "other", "leaseDurationSeconds": 15, "leaseTransitions": 3}
    api.objects[("leases", "ns", "lock")] = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "lock", "namespace": "ns", "resourceVersion": "1"},
        "spec": other,
    }
    run = asyncio.create_task(mgr.run(handle_signals=False))
    ctrl.queue.add(Request("ns", "a"))
    for _ in range(5):
        await clock.advance(2.4)
    assert not mgr.is_leader and not rec.started.is_set()
    await clock.advance(15)
    await until(lambda: mgr.is_leader, what="lease acquired")
    assert api.objects[("leases", "ns", "lock")]["spec"]["leaseTransitions"] == 4
    rec.gate.set()
    await until(rec.started.is_set, what="reconcile started")
    mgr.stop()
    await until(run.done, what="manager stopped")
    assert run.result() == 0
    assert api.objects[("leases", "ns", "lock")]["spec"]["holderIdentity"] == ""


async def test_stop_before_leadership_returns_cleanly() -> None:
    clock = FakeClock()
    election = LeaderElectionConfig(name="lock", namespace="ns", identity="me")
    api, mgr, _, rec = build(clock, election=election)
    api.down.add("leases")
    run = asyncio.create_task(mgr.run(handle_signals=False))
    await clock.advance(10)
    mgr.stop()
    await until(run.done, what="manager stopped")
    assert run.result() == 0
    assert not rec.started.is_set()


async def test_a_failing_task_makes_run_return_1() -> None:
    clock = FakeClock()
    _, mgr, _, _ = build(clock)

    async def broken() -> None:
        raise RuntimeError("boom")

    mgr.add_runnable("broken", broken)
    run = asyncio.create_task(mgr.run(handle_signals=False))
    await until(run.done, what="manager stopped")  # without any time passing
    assert run.result() == 1


def test_bind_addresses() -> None:
    assert parse_bind_address(":8080") == ("0.0.0.0", 8080)
    assert parse_bind_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_bind_address("[::1]:9440") == ("::1", 9440)
    assert parse_bind_address("0") is None and parse_bind_address("") is None
    with pytest.raises(ValueError, match="invalid bind address"):
        parse_bind_address("localhost")


async def test_graceful_stop_flushes_runnables_before_cancelling_them() -> None:
    clock = FakeClock()
    _, mgr, _, _ = build(clock)
    flushed: list[str] = []

    async def forever() -> None:
        await asyncio.Event().wait()

    async def flush() -> None:
        flushed.append("events")

    async def hung_flush() -> None:
        await asyncio.Event().wait()

    mgr.add_runnable("sender", forever, flush=flush)
    mgr.add_runnable("stuck", forever, flush=hung_flush)
    run = asyncio.create_task(mgr.run(handle_signals=False))
    await settle()
    assert not flushed  # flushing is for stopping
    mgr.stop()
    await until(lambda: flushed == ["events"] and clock.pending_sleepers == 1, what="flushed, flush timer set")
    await settle()
    assert not run.done()  # waiting for the stuck flush, at most 5 s
    await clock.advance(5)
    await until(run.done, what="manager stopped")
    assert run.result() == 0


async def test_a_lost_lease_cancels_in_flight_reconciles_at_once_and_returns_1() -> None:
    """Once the lease is lost the new leader may start: nothing of ours may run on (no grace period, no
    queued key started, no lease release written)."""
    clock = FakeClock()
    election = LeaderElectionConfig(
        name="lock", namespace="ns", identity="me", lease_duration=15, renew_deadline=10, retry_period=2
    )
    api, mgr, ctrl, rec = build(clock, grace=1000, election=election)
    run = asyncio.create_task(mgr.run(handle_signals=False))
    await until(lambda: mgr.is_leader, what="lease acquired")
    ctrl.queue.add(Request("ns", "a"))
    ctrl.queue.add(Request("ns", "b"))
    await until(rec.started.is_set, what="reconcile of a started")
    lease = api.objects[("leases", "ns", "lock")]  # taken over: another holder, a new resourceVersion
    lease["spec"]["holderIdentity"] = "other"
    lease["metadata"]["resourceVersion"] = "1000"
    writes = len(api.writes())
    await clock.advance(2)  # the next renewal finds it
    await until(run.done, what="manager stopped")
    assert run.result() == 1
    assert rec.cancelled == 1 and rec.finished == 0  # a cancelled at once; b, queued, never started
    assert [r.method for r in api.writes()[writes:]] == ["PUT"]  # the failed renewal only: no release
    assert api.objects[("leases", "ns", "lock")]["spec"]["holderIdentity"] == "other"
