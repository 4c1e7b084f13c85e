"""``release_worker()``: a reconcile that only waits hands its worker back; its key stays processing
until it returns, its Result is handled as any other, the number released is bounded, and released
reconciles are stopped with the controller."""

import asyncio

from prometheus_client import CollectorRegistry

from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.runtime.controller import (
    BusyWorkers,
    Controller,
    ReconcileError,
    Request,
    Result,
    release_worker,
)
from kustomize_controller.runtime.metrics import RuntimeMetrics
from tests.unit.loop import complete, settle


class Waiter:
    """A reconciler whose keys named ``wait*`` release their worker and wait for ``gates[name]``."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.running: dict[str, int] = {}
        self.overlap = False
        self.released: dict[str, bool] = {}
        self.gates: dict[str, asyncio.Event] = {}
        self.outcome: dict[str, object] = {}
        self.cancelled: list[str] = []

    async def reconcile(self, request: Request) -> Result:
        name = request.name
        self.calls.append(name)
        self.running[name] = self.running.get(name, 0) + 1
        self.overlap = self.overlap or self.running[name] > 1
        try:
            if name.startswith("wait"):
                self.released[name] = release_worker()
                await self.gates.setdefault(name, asyncio.Event()).wait()
            outcome = self.outcome.get(name, Result())
            if isinstance(outcome, BaseException):
                raise outcome
            assert isinstance(outcome, Result)
            return outcome
        except asyncio.CancelledError:
            self.cancelled.append(name)
            raise
        finally:
            self.running[name] -= 1


def setup(waiter: Waiter, *, concurrency: int = 1, max_detached: int = 8,
          busy: BusyWorkers | None = None) -> tuple[Controller, FakeClock, CollectorRegistry]:
    clock = FakeClock()
    registry = CollectorRegistry()
    ctrl = Controller(name="demo", reconciler=waiter, clock=clock,
                      metrics=RuntimeMetrics(clock=clock, registry=registry),
                      concurrency=concurrency, max_detached=max_detached, busy_workers=busy)
    return ctrl, clock, registry


def gauge(registry: CollectorRegistry, name: str) -> float | None:
    return registry.get_sample_value(name, {"controller": "demo"})


async def test_a_released_reconcile_frees_its_worker_and_keeps_its_key() -> None:
    waiter = Waiter()
    ctrl, _, registry = setup(waiter, concurrency=1)
    task = asyncio.create_task(ctrl.run())
    for name in ("wait1", "wait2", "b", "c"):
        ctrl.queue.add(Request("ns", name))
    await settle()
    # one worker, yet every key ran: the two waits gave the worker back
    assert waiter.calls == ["wait1", "wait2", "b", "c"] and waiter.released == {"wait1": True, "wait2": True}
    assert ctrl.detached == 2 and gauge(registry, "controller_detached_reconciles") == 2
    assert gauge(registry, "controller_runtime_active_workers") == 0
    assert Request("ns", "wait1") in ctrl.queue.processing

    ctrl.queue.add(Request("ns", "wait1"))  # an event while it waits: queued behind it, never in parallel
    await settle()
    assert waiter.calls.count("wait1") == 1
    waiter.gates.pop("wait1").set()  # the second run waits on a new gate
    await settle()
    assert waiter.calls.count("wait1") == 2 and not waiter.overlap
    assert ctrl.detached == 2  # the second run of wait1 released again; wait2 still waits
    ctrl.stop()
    await task


async def test_the_result_of_a_released_reconcile_is_handled() -> None:
    waiter = Waiter()
    waiter.outcome = {"wait": Result(requeue_after=60), "wait-err": ReconcileError("health check failed")}
    ctrl, clock, registry = setup(waiter)
    task = asyncio.create_task(ctrl.run())
    ctrl.queue.add(Request("ns", "wait"))
    ctrl.queue.add(Request("ns", "wait-err"))
    await settle()
    await clock.advance(30)
    waiter.gates["wait"].set()
    waiter.gates["wait-err"].set()
    await settle()
    assert ctrl.detached == 0 and not ctrl.queue.processing
    assert ctrl.queue.num_requeues(Request("ns", "wait-err")) == 1  # backoff, as for a held reconcile
    assert registry.get_sample_value("controller_runtime_reconcile_errors_total", {"controller": "demo"}) == 1
    # the reconcile time covers the wait: 30 s each on the fake clock
    assert registry.get_sample_value("controller_runtime_reconcile_time_seconds_sum", {"controller": "demo"}) == 60
    await clock.advance(60)
    await settle()
    assert waiter.calls.count("wait") == 2
    ctrl.stop()
    await task


async def test_the_bound_keeps_the_next_wait_on_its_worker() -> None:
    waiter = Waiter()
    ctrl, _, registry = setup(waiter, concurrency=2, max_detached=1)
    task = asyncio.create_task(ctrl.run())
    for name in ("wait1", "wait2", "b"):
        ctrl.queue.add(Request("ns", name))
    await settle()
    assert waiter.released == {"wait1": True, "wait2": False}  # held by its worker, as upstream
    assert waiter.calls == ["wait1", "wait2", "b"]  # the second worker remained for b
    assert gauge(registry, "controller_runtime_active_workers") == 1
    waiter.gates["wait2"].set()
    await settle()
    assert gauge(registry, "controller_runtime_active_workers") == 0 and ctrl.detached == 1
    ctrl.stop()
    await task


async def test_the_shared_busy_worker_count_leaves_released_reconciles_out() -> None:
    waiter = Waiter()
    waiter.outcome = {"wait2": ReconcileError("health check failed")}
    busy = BusyWorkers()  # as the application shares it with the builder
    ctrl, _, registry = setup(waiter, concurrency=2, max_detached=1, busy=busy)
    assert ctrl.busy_workers is busy
    task = asyncio.create_task(ctrl.run())
    for name in ("wait1", "wait2"):
        ctrl.queue.add(Request("ns", name))
    await settle()
    assert waiter.released == {"wait1": True, "wait2": False}
    assert busy.active == 1 == gauge(registry, "controller_runtime_active_workers")  # wait2 holds its worker
    waiter.gates["wait2"].set()  # fails on its worker
    await settle()
    assert busy.active == 0
    waiter.gates["wait1"].set()  # the released one ends: its worker was counted free already
    await settle()
    assert busy.active == 0 == gauge(registry, "controller_runtime_active_workers") and ctrl.detached == 0
    ctrl.stop()
    await task


async def test_releasing_is_off_by_default_and_outside_a_reconcile() -> None:
    assert release_worker() is False
    waiter = Waiter()
    ctrl, _, _ = setup(waiter, max_detached=0)
    task = asyncio.create_task(ctrl.run())
    ctrl.queue.add(Request("ns", "wait"))
    ctrl.queue.add(Request("ns", "b"))
    await settle()
    assert waiter.released == {"wait": False} and waiter.calls == ["wait"]
    waiter.gates["wait"].set()
    await settle()
    assert waiter.calls == ["wait", "b"]
    ctrl.stop()
    await task


async def test_stop_cancels_released_reconciles_and_run_returns() -> None:
    waiter = Waiter()
    ctrl, _, registry = setup(waiter)
    task = asyncio.create_task(ctrl.run())
    ctrl.queue.add(Request("ns", "wait1"))
    ctrl.queue.add(Request("ns", "wait2"))
    await settle()
    assert ctrl.detached == 2
    ctrl.stop()
    await complete(task)
    assert sorted(waiter.cancelled) == ["wait1", "wait2"]
    assert ctrl.detached == 0 and gauge(registry, "controller_detached_reconciles") == 0
    assert not ctrl.queue.processing


async def test_cancelling_run_cancels_released_and_held_reconciles() -> None:
    # lost leadership: the manager cancels the controller's task, nothing may outlive it
    waiter = Waiter()
    ctrl, _, _ = setup(waiter, concurrency=1, max_detached=1)
    task = asyncio.create_task(ctrl.run())
    ctrl.queue.add(Request("ns", "wait1"))
    ctrl.queue.add(Request("ns", "wait2"))  # over the bound: held by the only worker
    await settle()
    assert waiter.released == {"wait1": True, "wait2": False}
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert sorted(waiter.cancelled) == ["wait1", "wait2"]
    assert all(n == 0 for n in waiter.running.values())

