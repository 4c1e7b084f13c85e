import asyncio

import pytest
from prometheus_client import CollectorRegistry

from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.runtime.leader import LeaderElectionConfig, LeaderElectionLost, LeaderElector
from kustomize_controller.runtime.metrics import RuntimeMetrics
from tests.unit.loop import settle, until
from tests.unit.runtime.fakeapi import FakeApi

KEY = ("leases", "flux-system", "lock")


def elector(api: FakeApi, clock: FakeClock, identity: str, registry: CollectorRegistry | None = None) -> LeaderElector:
    cfg = LeaderElectionConfig(
        name="lock", namespace="flux-system", identity=identity, lease_duration=15, renew_deadline=10, retry_period=2
    )
    metrics = RuntimeMetrics(clock=clock, registry=registry or CollectorRegistry())
    return LeaderElector(client=api.client(), config=cfg, clock=clock, metrics=metrics)


def spec(api: FakeApi) -> dict:
    return api.objects[KEY]["spec"]


async def test_acquire_creates_the_lease() -> None:
    api, clock, registry = FakeApi(), FakeClock(), CollectorRegistry()
    a = elector(api, clock, "a", registry)
    assert await a.try_acquire_or_renew()
    assert a.is_leader()
    s = spec(api)
    assert s["holderIdentity"] == "a" and s["leaseTransitions"] == 0 and s["leaseDurationSeconds"] == 15
    assert s["acquireTime"] == s["renewTime"] == "2026-01-01T00:00:00.000000Z"
    await a.acquire()
    assert registry.get_sample_value("leader_election_master_status", {"name": "lock"}) == 1


async def test_renew_keeps_acquire_time_and_transitions() -> None:
    api, clock = FakeApi(), FakeClock()
    a = elector(api, clock, "a")
    await a.try_acquire_or_renew()
    await clock.advance(2)
    assert await a.try_acquire_or_renew()
    s = spec(api)
    assert s["acquireTime"] == "2026-01-01T00:00:00.000000Z"
    assert s["renewTime"] == "2026-01-01T00:00:02.000000Z"
    assert s["leaseTransitions"] == 0
    assert len(api.writes("PUT")) == 1  # fast path: no GET before the update
    assert [r.method for r in api.transport.requests[-1:]] == ["PUT"]


async def test_candidate_waits_for_expiry_on_its_own_clock_then_steals() -> None:
    api, clock = FakeApi(), FakeClock()
    a, b = elector(api, clock, "a"), elector(api, clock, "b")
    await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    await clock.advance(14)
    assert not await b.try_acquire_or_renew()  # 14 s since b first saw this record
    await clock.advance(1.5)
    assert await b.try_acquire_or_renew()
    assert spec(api)["holderIdentity"] == "b" and spec(api)["leaseTransitions"] == 1
    # a learns it lost on its next attempt (the fast path conflicts, then it sees b's fresh lease)
    assert not await a.try_acquire_or_renew()
    assert not a.is_leader()


async def test_expiry_ignores_the_renew_time_written_in_the_lease() -> None:
    api, clock = FakeApi(), FakeClock()
    a = elector(api, clock, "a")
    await a.try_acquire_or_renew()
    api.objects[KEY]["spec"]["renewTime"] = "2000-01-01T00:00:00.000000Z"  # a skewed clock wrote this
    b = elector(api, clock, "b")
    assert not await b.try_acquire_or_renew()  # b just observed it: valid for 15 s from now


async def test_each_change_of_the_record_restarts_the_expiry() -> None:
    api, clock = FakeApi(), FakeClock()
    a, b = elector(api, clock, "a"), elector(api, clock, "b")
    await a.try_acquire_or_renew()
    for _ in range(5):
        await clock.advance(10)
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()


async def test_release_lets_the_other_take_over_at_once() -> None:
    api, clock, registry = FakeApi(), FakeClock(), CollectorRegistry()
    a, b = elector(api, clock, "a", registry), elector(api, clock, "b")
    await a.acquire()
    assert not await b.try_acquire_or_renew()
    assert await a.release()
    s = spec(api)
    assert s["holderIdentity"] == "" and s["leaseDurationSeconds"] == 1 and s["leaseTransitions"] == 0
    assert registry.get_sample_value("leader_election_master_status", {"name": "lock"}) == 0
    assert await b.try_acquire_or_renew()
    assert spec(api)["leaseTransitions"] == 1


async def test_release_retries_a_conflict() -> None:
    api, clock = FakeApi(), FakeClock()
    a = elector(api, clock, "a")
    await a.acquire()
    api.fail_next[("PUT", "leases")] = 409
    assert await a.release()
    assert spec(api)["holderIdentity"] == ""


async def test_release_when_not_leading_is_a_no_op() -> None:
    api, clock = FakeApi(), FakeClock()
    assert not await elector(api, clock, "a").release()
    assert api.writes() == []


async def test_conflicting_update_fails_the_attempt() -> None:
    api, clock = FakeApi(), FakeClock()
    a, b = elector(api, clock, "a"), elector(api, clock, "b")
    await a.try_acquire_or_renew()
    await a.release()
    api.fail_next[("PUT", "leases")] = 409  # someone else wrote between b's GET and PUT
    assert not await b.try_acquire_or_renew()


async def test_hold_raises_when_renewals_fail_past_the_deadline() -> None:
    api, clock, registry = FakeApi(), FakeClock(), CollectorRegistry()
    a = elector(api, clock, "a", registry)
    await a.acquire()
    hold = asyncio.create_task(a.hold())
    for _ in range(3):
        await clock.advance(2)
    assert not hold.done()
    api.down.add("leases")
    for _ in range(8):
        await clock.advance(2)
    assert hold.done()
    with pytest.raises(LeaderElectionLost, match="not renewed within 10s"):
        await hold
    assert registry.get_sample_value("leader_election_master_status", {"name": "lock"}) == 0


async def test_transient_failure_within_the_deadline_is_survived() -> None:
    api, clock = FakeApi(), FakeClock()
    a = elector(api, clock, "a")
    await a.acquire()
    hold = asyncio.create_task(a.hold())
    api.down.add("leases")
    for _ in range(3):
        await clock.advance(2)
    api.down.clear()
    for _ in range(10):
        await clock.advance(2)
    assert not hold.done()
    hold.cancel()


async def test_hold_gives_up_at_the_renew_deadline_while_a_renewal_hangs() -> None:
    """The deadline counts from the start of the last successful renewal, and a renewal still hanging then
    (a request that has not timed out yet) does not keep the leader leading: a candidate that saw that
    renewal may take over lease_duration later, and by then this one must have stopped."""
    api, clock = FakeApi(), FakeClock()
    a = elector(api, clock, "a")
    await a.acquire()  # renewed at t0
    t0 = clock.monotonic()
    serve = api.transport._handler
    hung = asyncio.Event()

    def handler(req):  # every lease write from now on hangs (its real-time timeout is far away)
        return hung.wait() if "leases" in req.url and req.method == "PUT" else serve(req)

    api.transport._handler = handler
    hold = asyncio.create_task(a.hold())
    await settle()  # hold() sleeps its first retry period
    await clock.advance(9.5)
    assert not hold.done()
    await clock.advance(0.5)
    await until(hold.done, what="hold gave up")
    assert clock.monotonic() == t0 + 10
    with pytest.raises(LeaderElectionLost, match="not renewed within 10s"):
        await hold


async def test_hold_stops_at_once_when_the_lease_is_held_by_another() -> None:
    api, clock, registry = FakeApi(), FakeClock(), CollectorRegistry()
    a = elector(api, clock, "a", registry)
    await a.acquire()
    hold = asyncio.create_task(a.hold())
    await settle()
    await clock.advance(2)
    assert not hold.done()
    lease = api.objects[KEY]  # someone else's write: another holder, a new resourceVersion
    lease["spec"]["holderIdentity"] = "b"
    lease["metadata"]["resourceVersion"] = str(int(lease["metadata"]["resourceVersion"]) + 1000)
    await clock.advance(2)  # the next renewal sees it: no waiting for the renew deadline
    await until(hold.done, what="hold gave up")
    with pytest.raises(LeaderElectionLost, match="lease flux-system/lock is held by b"):
        await hold
    assert registry.get_sample_value("leader_election_master_status", {"name": "lock"}) == 0


async def test_a_deleted_lease_is_not_taken_while_its_holder_may_still_lead() -> None:
    api, clock = FakeApi(), FakeClock()
    a, b = elector(api, clock, "a"), elector(api, clock, "b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()  # b saw a's lease
    del api.objects[KEY]  # `kubectl delete lease`
    assert not await b.try_acquire_or_renew()
    assert KEY not in api.objects  # a may still be reconciling: b waits for a's lease to expire
    await clock.advance(2)
    assert await a.try_acquire_or_renew()  # the holder re-creates it at its next renewal
    assert spec(api)["holderIdentity"] == "a"
    assert not await b.try_acquire_or_renew()
    del api.objects[KEY]  # deleted again, and a is gone for good: b takes over once a's lease expired
    await clock.advance(14)
    assert not await b.try_acquire_or_renew()
    await clock.advance(1.5)
    assert await b.try_acquire_or_renew()
    assert spec(api)["holderIdentity"] == "b"


def test_config_validation_and_request_timeout() -> None:
    with pytest.raises(ValueError, match="lease duration"):
        LeaderElectionConfig(name="l", namespace="n", identity="i", lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match="retry period"):
        LeaderElectionConfig(name="l", namespace="n", identity="i", renew_deadline=5, retry_period=5)
    assert LeaderElectionConfig(name="l", namespace="n", identity="i").request_timeout == 15
    cfg = LeaderElectionConfig(
        name="l", namespace="n", identity="i", lease_duration=3, renew_deadline=1.5, retry_period=1
    )
    assert cfg.request_timeout == 1.0


async def test_lease_requests_use_the_shorter_timeout() -> None:
    api, clock = FakeApi(), FakeClock()
    await elector(api, clock, "a").try_acquire_or_renew()
    lease_requests = [r for r in api.transport.requests if "leases" in r.url]
    assert lease_requests and all(r.timeout.total == 5 for r in lease_requests)
