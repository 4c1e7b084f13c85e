"""Two managers with leader election on one Lease (short timings): only the leader reconciles; when
the leader dies the other takes over within lease duration + retry period; a graceful stop releases
the lease and the other takes over within one retry period; a lost lease makes ``run()`` return 1."""

import asyncio
import contextlib
from datetime import datetime
from typing import Any

import pytest

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.runtime.clock import FakeClock, RealClock
from kustomize_controller.runtime.leader import LeaderElectionConfig, LeaderElector
from kustomize_controller.runtime.manager import Manager, ManagerOptions
from tests.integration.runtime.helpers import configmap, eventually, make_client, mirror_controller

pytestmark = pytest.mark.integration

LEASE = "demo-leader-election"
LEASE_DURATION = 2.0
RENEW_DEADLINE = 1.5
RETRY_PERIOD = 0.5
# scheduling slack on top of the algorithm's bound (a busy CI machine), not a performance target
SLACK = 1.0

Log = list[tuple[str, str, float, float]]


class Replica:
    def __init__(self, client: KubeClient, manager: Manager) -> None:
        self.client = client
        self.manager = manager
        self.task: asyncio.Task[int] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.manager.run(handle_signals=False))


async def replica(cluster: Any, identity: str, log: Log) -> Replica:
    client = await make_client(cluster)
    clock = RealClock()
    election = LeaderElectionConfig(
        name=LEASE,
        namespace=cluster.namespace,
        identity=identity,
        lease_duration=LEASE_DURATION,
        renew_deadline=RENEW_DEADLINE,
        retry_period=RETRY_PERIOD,
    )
    options = ManagerOptions(metrics_addr="0", health_addr="0", leader_election=election, graceful_shutdown_timeout=5)
    manager = Manager(client=client, clock=clock, options=options)
    mirror_controller(manager, client=client, clock=clock, name=identity, log=log, hold=0.05)
    return Replica(client, manager)


def micro(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")


async def lease_spec(client: KubeClient, ns: str) -> dict[str, Any]:
    return (await client.get("coordination.k8s.io/v1", "Lease", LEASE, ns))["spec"]


def assert_one_reconciler_at_a_time(log: Log) -> None:
    for who_a, _, start_a, end_a in log:
        for who_b, _, start_b, end_b in log:
            if who_a != who_b:
                assert end_a <= start_b or end_b <= start_a, f"{who_a} and {who_b} reconciled at the same time"


async def cleanup(*replicas: Replica) -> None:
    for r in replicas:
        if r.task is not None and not r.task.done():
            r.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await r.task
        await r.client.close()


async def test_killed_leader_is_replaced_within_lease_duration_plus_retry(cluster) -> None:
    ns = cluster.namespace
    log: Log = []
    a, b = await replica(cluster, "replica-a", log), await replica(cluster, "replica-b", log)
    try:
        a.start()
        await eventually(lambda: a.manager.is_leader, what="a leads")
        b.start()
        for i in range(4):
            await a.client.create(configmap(f"cm{i}", ns, k=str(i)))
        await eventually(
            lambda: {e[1] for e in log if e[0] == "replica-a"} >= {f"{ns}/cm{i}" for i in range(4)},
            what="a reconciled everything",
        )
        await asyncio.sleep(3 * RETRY_PERIOD)
        assert not b.manager.is_leader
        assert all(who == "replica-a" for who, *_ in log), "the standby must not reconcile"

        assert a.task is not None
        a.task.cancel()  # a crash: no release
        with contextlib.suppress(asyncio.CancelledError):
            await a.task
        dead = await lease_spec(b.client, ns)
        assert dead["holderIdentity"] == "replica-a"

        await eventually(lambda: b.manager.is_leader, within=10, what="b takes over")
        taken = await lease_spec(b.client, ns)
        assert taken["holderIdentity"] == "replica-b"
        assert taken["leaseTransitions"] == dead["leaseTransitions"] + 1
        gap = (micro(taken["acquireTime"]) - micro(dead["renewTime"])).total_seconds()
        assert gap <= LEASE_DURATION + RETRY_PERIOD * 1.2 + SLACK, gap

        await a.client.create(configmap("after-failover", ns, k="x"))
        await eventually(
            lambda: any(e[0] == "replica-b" and e[1] == f"{ns}/after-failover" for e in log), what="b reconciles"
        )
        assert_one_reconciler_at_a_time(log)
    finally:
        await cleanup(a, b)


async def test_graceful_stop_releases_and_the_standby_takes_over_within_one_retry(cluster) -> None:
    ns = cluster.namespace
    log: Log = []
    a, b = await replica(cluster, "replica-a", log), await replica(cluster, "replica-b", log)
    try:
        a.start()
        await eventually(lambda: a.manager.is_leader, what="a leads")
        b.start()
        await a.client.create(configmap("cm", ns, k="v"))
        await eventually(lambda: any(e[0] == "replica-a" for e in log), what="a reconciled")
        a.manager.stop()
        assert a.task is not None
        assert await asyncio.wait_for(a.task, 10) == 0
        loop = asyncio.get_running_loop()
        stopped_at = loop.time()
        assert a.manager.elector is not None
        assert a.manager.elector.observed_holder == "", "the lease was released (holder cleared)"
        await eventually(lambda: b.manager.is_leader, within=10, what="b takes over")
        gap = loop.time() - stopped_at
        taken = await lease_spec(b.client, ns)
        assert taken["holderIdentity"] == "replica-b" and taken["leaseTransitions"] == 1
        # without the release b would wait a whole lease duration; with it, one jittered retry period
        assert gap <= RETRY_PERIOD * 1.2 + SLACK, gap
        assert_one_reconciler_at_a_time(log)
    finally:
        await cleanup(a, b)


async def test_losing_the_lease_makes_run_return_1(cluster) -> None:
    server = cluster.require_server()
    log: Log = []
    a = await replica(cluster, "replica-a", log)
    try:
        a.start()
        await eventually(lambda: a.manager.is_leader, what="a leads")
        server.faults.fail(path=f"/leases/{LEASE}$", status=500, count=None)
        assert a.task is not None
        assert await asyncio.wait_for(a.task, 10) == 1
        assert not a.manager.is_leader
        text = a.manager.metrics.exposition().decode()
        assert f'leader_election_master_status{{name="{LEASE}"}} 0.0' in text
    finally:
        server.faults.clear()
        await cleanup(a)


async def test_a_standby_takes_a_released_lease_at_once_not_at_its_next_retry(cluster) -> None:
    """The stand-by watches the Lease: the release wakes it, with the (fake) clock standing still."""
    client = await make_client(cluster)
    clock = FakeClock()
    start = clock.monotonic()

    def elector(identity: str) -> LeaderElector:
        config = LeaderElectionConfig(name="released-lease", namespace=cluster.namespace, identity=identity,
                                      lease_duration=35, renew_deadline=30, retry_period=5)
        return LeaderElector(client=client, config=config, clock=clock)

    a, b = elector("replica-a"), elector("replica-b")
    standby: asyncio.Task[None] | None = None
    try:
        await a.acquire()
        standby = asyncio.create_task(b.acquire())
        await eventually(lambda: b.observed_holder == "replica-a", what="b found the lease held by a")
        await eventually(lambda: clock.pending_sleepers >= 1, what="b waits for its retry")
        assert not standby.done()
        assert await a.release()
        await asyncio.wait_for(standby, 30)  # a guard against a hang, not a timing
        assert b.is_leader() and clock.monotonic() == start  # no retry period had to pass
        # the leader's watch of the Lease ended with the wait: no task outlives acquire()
        assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("lease-watch-") and not t.done()]
        spec = (await client.get("coordination.k8s.io/v1", "Lease", "released-lease", cluster.namespace))["spec"]
        assert spec["holderIdentity"] == "replica-b" and spec["leaseTransitions"] == 1
    finally:
        if standby is not None and not standby.done():
            standby.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await standby
        await client.close()
