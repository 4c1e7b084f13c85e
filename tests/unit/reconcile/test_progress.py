"""Progress publication held for ``progress_delay`` seconds, then published by the context's timer."""

import asyncio
from typing import Any

from kustomize_controller.api.kustomization import parse_kustomization
from kustomize_controller.reconcile.context import READY, ReconcileContext
from kustomize_controller.reconcile.status import StatusPatcher
from kustomize_controller.runtime.clock import FakeClock
from tests.unit.reconcile.test_status import FakeClient, doc


class _Notifier:
    async def emit(self, *args: Any, **kwargs: Any) -> None:
        return None


def context(clock: FakeClock, client: FakeClient, *, delay: float) -> ReconcileContext:
    obj = doc()
    return ReconcileContext(
        ks=parse_kustomization(obj), obj=obj, patcher=StatusPatcher(client=client, obj=obj, clock=clock),
        clock=clock, notifier=_Notifier(), started=clock.monotonic(), progress_delay=delay,  # type: ignore[arg-type]
    )


def ready_reasons(client: FakeClient) -> list[str]:
    out = []
    for call in client.calls:
        conditions = (call["body"].get("status") or {}).get("conditions") or []
        out += [c["reason"] for c in conditions if c["type"] == READY]
    return out


async def test_a_reconcile_shorter_than_the_delay_writes_no_progress() -> None:
    clock, client = FakeClock(), FakeClient()
    ctx = context(clock, client, delay=2.0)
    async with ctx.publishing_progress():
        ctx.mark_unknown(READY, "Progressing", "Reconciliation in progress")
        await ctx.progress()
        await clock.advance(1.5)
        await ctx.progress()
    assert client.calls == []
    assert clock.pending_sleepers == 0  # the timer is gone with the reconcile
    ctx.mark_true(READY, "ReconciliationSucceeded", "Applied revision: r")
    await ctx.patch()
    assert ready_reasons(client) == ["ReconciliationSucceeded"]


async def test_the_timer_publishes_the_held_state_and_later_steps_are_written_at_once() -> None:
    clock, client = FakeClock(), FakeClient()
    ctx = context(clock, client, delay=2.0)
    async with ctx.publishing_progress():
        ctx.mark_unknown(READY, "Progressing", "Reconciliation in progress")
        await ctx.progress()
        await asyncio.sleep(0)
        await clock.advance(2.0)
        for _ in range(3):
            await asyncio.sleep(0)
        assert ready_reasons(client) == ["Progressing"]
        ctx.mark_unknown(READY, "Progressing", "Running health checks")
        await ctx.progress()
        assert len(client.calls) == 2


async def test_held_progress_stays_held_when_the_timer_fires_and_zero_is_upstream() -> None:
    clock, client = FakeClock(), FakeClient()
    ctx = context(clock, client, delay=2.0)
    ctx.hold_progress = True
    async with ctx.publishing_progress():
        ctx.mark_unknown(READY, "Progressing", "Reconciliation in progress")
        await ctx.progress()
        await clock.advance(3.0)
        for _ in range(3):
            await asyncio.sleep(0)
    assert client.calls == []
    upstream = context(clock, client, delay=0.0)
    async with upstream.publishing_progress():
        upstream.mark_unknown(READY, "Progressing", "Reconciliation in progress")
        await upstream.progress()
    assert ready_reasons(client) == ["Progressing"]


class _SlowClient(FakeClient):
    """A patch that is still in flight when the reconcile's body ends."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.completed = 0

    async def patch(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        result = await super().patch(*args, **kwargs)
        await self.release.wait()
        self.completed += 1
        return result


async def test_a_progress_patch_in_flight_when_the_reconcile_ends_is_let_land() -> None:
    """Cancelled mid-flight, the patcher would not record what the server may already have applied,
    and the final patch would be computed on a stale base."""
    clock, client = FakeClock(), _SlowClient()
    ctx = context(clock, client, delay=2.0)
    body_ended = asyncio.Event()

    async def reconcile() -> None:
        async with ctx.publishing_progress():
            ctx.mark_unknown(READY, "Progressing", "Reconciliation in progress")
            await ctx.progress()
            await asyncio.sleep(0)
            await clock.advance(2.0)
            for _ in range(3):
                await asyncio.sleep(0)
            assert len(client.calls) == 1  # the timer's patch is now waiting for its answer
            body_ended.set()

    done = asyncio.ensure_future(reconcile())
    await body_ended.wait()
    for _ in range(5):
        await asyncio.sleep(0)
    assert not done.done()  # the body ended; leaving waits for the patch
    client.release.set()
    await done
    assert client.completed == 1


async def test_the_timer_never_publishes_a_failure_the_reconciler_has_not_reported_yet() -> None:
    """A step failed (Ready=False set) and its clean-up was still running when the delay passed: the
    reconciler may yet retry it quickly (the API server was unreachable), so only the final patch,
    after its decision, may write how the reconcile ended."""
    clock, client = FakeClock(), FakeClient()
    ctx = context(clock, client, delay=2.0)
    async with ctx.publishing_progress():
        ctx.mark_unknown(READY, "Progressing", "Reconciliation in progress")
        await ctx.progress()  # held: pending for the timer
        ctx.mark_false(READY, "ReconciliationFailed", "ConfigMap/ns/a apply failed: Server disconnected")
        await asyncio.sleep(0)
        await clock.advance(2.0)  # the failed step's clean-up is still running
        for _ in range(3):
            await asyncio.sleep(0)
        assert client.calls == []
        await ctx.progress()  # after the delay progress is written at once, but not a failure either
        assert client.calls == []
        ctx.mark_unknown(READY, "Progressing", "Reconciliation in progress")  # the reconciler's decision
    await ctx.patch()
    assert ready_reasons(client) == ["Progressing"]
