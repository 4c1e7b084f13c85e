import asyncio
import json
from io import StringIO

import structlog
from prometheus_client import CollectorRegistry

from kustomize_controller.kube.errors import NotFoundError
from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.runtime.controller import Controller, ReconcileError, Request, Result, TerminalError
from kustomize_controller.runtime.logs import configure_logging
from kustomize_controller.runtime.metrics import RuntimeMetrics
from tests.unit.loop import complete, settle


class Script:
    """A reconciler whose outcome per call comes from a list (a Result or an exception)."""

    def __init__(self, *outcomes: object) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[tuple[Request, float]] = []
        self.clock: FakeClock | None = None
        self.running = 0
        self.max_running = 0
        self.gate: asyncio.Event | None = None
        self.contexts: list[dict] = []

    async def reconcile(self, request: Request) -> Result:
        assert self.clock is not None
        self.calls.append((request, self.clock.monotonic()))
        self.contexts.append(structlog.contextvars.get_contextvars())
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            if self.gate is not None:
                await self.gate.wait()
            outcome = self.outcomes.pop(0) if self.outcomes else Result()
            if isinstance(outcome, BaseException):
                raise outcome
            assert isinstance(outcome, Result)
            return outcome
        finally:
            self.running -= 1


def setup(script: Script, concurrency: int = 1) -> tuple[Controller, FakeClock, CollectorRegistry]:
    clock = FakeClock()
    script.clock = clock
    registry = CollectorRegistry()
    ctrl = Controller(
        name="demo",
        reconciler=script,
        clock=clock,
        metrics=RuntimeMetrics(clock=clock, registry=registry),
        concurrency=concurrency,
    )
    return ctrl, clock, registry


def total(registry: CollectorRegistry, result: str) -> float | None:
    return registry.get_sample_value("controller_runtime_reconcile_total", {"controller": "demo", "result": result})


REQ = Request("ns", "a")


async def test_results_are_preset_to_zero() -> None:
    _, _, registry = setup(Script())
    for result in ("success", "error", "requeue", "requeue_after"):
        assert total(registry, result) == 0
    assert registry.get_sample_value("controller_runtime_max_concurrent_reconciles", {"controller": "demo"}) == 1


async def test_requeue_after_forgets_backoff_and_runs_again_later() -> None:
    script = Script(ReconcileError("x"), Result(requeue_after=60), Result())
    ctrl, clock, registry = setup(script)
    task = asyncio.create_task(ctrl.run())
    ctrl.queue.add(REQ)
    await settle()
    assert ctrl.queue.num_requeues(REQ) == 1  # the error backed off
    await clock.advance(0.75)
    await settle()
    assert ctrl.queue.num_requeues(REQ) == 0  # requeue_after forgot it
    await clock.advance(59)
    await settle()
    assert len(script.calls) == 2
    await clock.advance(1)
    await settle()
    assert [t - script.calls[0][1] for _, t in script.calls] == [0, 0.75, 60.75]
    assert (total(registry, "error"), total(registry, "requeue_after"), total(registry, "success")) == (1, 1, 1)
    ctrl.stop()
    await task


async def test_errors_back_off_exponentially_without_forget() -> None:
    script = Script(*(ReconcileError("fail") for _ in range(4)))
    ctrl, clock, registry = setup(script)
    task = asyncio.create_task(ctrl.run())
    ctrl.queue.add(REQ)
    await settle()
    for step in (0.75, 1.5, 3.0):
        await clock.advance(step)
        await settle()
    start = script.calls[0][1]
    assert [t - start for _, t in script.calls] == [0, 0.75, 2.25, 5.25]
    assert registry.get_sample_value("controller_runtime_reconcile_errors_total", {"controller": "demo"}) == 4
    assert registry.get_sample_value("controller_runtime_reconcile_panics_total", {"controller": "demo"}) == 0
    ctrl.stop()
    await task


async def test_terminal_error_is_counted_and_not_retried() -> None:
    script = Script(TerminalError("bad spec"))
    ctrl, clock, registry = setup(script)
    task = asyncio.create_task(ctrl.run())
    ctrl.queue.add(REQ)
    await settle()
    await clock.advance(3600)
    await settle()
    assert len(script.calls) == 1
    assert registry.get_sample_value("controller_runtime_terminal_reconcile_errors_total", {"controller": "demo"}) == 1
    assert total(registry, "error") == 1
    ctrl.stop()
    await task


async def test_unexpected_exception_is_a_panic_and_retried() -> None:
    script = Script(KeyError("bug"), NotFoundError("gone", status=404))
    ctrl, clock, registry = setup(script)
    task = asyncio.create_task(ctrl.run())
    ctrl.queue.add(REQ)
    await settle()
    await clock.advance(0.75)
    await settle()
    assert len(script.calls) == 2
    assert registry.get_sample_value("controller_runtime_reconcile_panics_total", {"controller": "demo"}) == 1
    assert registry.get_sample_value("controller_runtime_reconcile_errors_total", {"controller": "demo"}) == 2
    ctrl.stop()
    await task


async def test_requeue_flag_uses_the_rate_limiter() -> None:
    script = Script(Result(requeue=True), Result())
    ctrl, clock, registry = setup(script)
    task = asyncio.create_task(ctrl.run())
    ctrl.queue.add(REQ)
    await settle()
    await clock.advance(0.75)
    await settle()
    assert len(script.calls) == 2 and total(registry, "requeue") == 1
    ctrl.stop()
    await task


async def test_one_key_never_runs_twice_at_once_but_keys_run_in_parallel() -> None:
    script = Script()
    script.gate = asyncio.Event()
    ctrl, _, registry = setup(script, concurrency=3)
    task = asyncio.create_task(ctrl.run())
    for name in ("a", "b", "a", "c", "a"):
        ctrl.queue.add(Request("ns", name))
    await settle()
    assert script.running == 3 and sorted(r.name for r, _ in script.calls) == ["a", "b", "c"]
    assert registry.get_sample_value("controller_runtime_active_workers", {"controller": "demo"}) == 3
    ctrl.queue.add(Request("ns", "a"))  # while a is running: exactly one more run afterwards
    script.gate.set()
    await settle()
    assert sorted(r.name for r, _ in script.calls) == ["a", "a", "b", "c"]
    ctrl.stop()
    await task


async def test_stop_cancels_in_flight_and_drops_queued() -> None:
    script = Script()
    script.gate = asyncio.Event()
    ctrl, _, _ = setup(script)
    task = asyncio.create_task(ctrl.run())
    ctrl.queue.add(Request("ns", "a"))
    ctrl.queue.add(Request("ns", "b"))
    await settle()
    ctrl.stop()  # the gate is never opened: the reconcile of a is cancelled, not waited for
    await complete(task)
    assert [r.name for r, _ in script.calls] == ["a"]
    assert not ctrl.busy and ctrl.queue.shutting_down


async def test_reconcile_logs_carry_context() -> None:
    out = StringIO()
    configure_logging(level="info", encoding="json", stream=out)
    try:
        script = Script(ReconcileError("boom"))
        ctrl, _, _ = setup(script)
        task = asyncio.create_task(ctrl.run())
        ctrl.queue.add(REQ)
        await settle()
        ctx = script.contexts[0]
        assert ctx["controller"] == "demo" and ctx["name"] == "a" and ctx["namespace"] == "ns"
        assert len(ctx["reconcile_id"]) == 36
        lines = [json.loads(x) for x in out.getvalue().splitlines()]
        err = next(x for x in lines if x["msg"] == "Reconciler error")
        assert list(err)[:4] == ["level", "ts", "logger", "msg"]
        assert err["level"] == "error" and err["reconcile_id"] == ctx["reconcile_id"]
        assert "ReconcileError: boom" in err["stacktrace"]
        ctrl.stop()
        await task
    finally:
        structlog.reset_defaults()
