"""EnqueueHooks / Interrupt: the health-wait cancellation behind ``CancelHealthCheckOnNewRevision``."""

from __future__ import annotations

import asyncio

import pytest

from kustomize_controller.reconcile.interrupt import EnqueueHooks, HealthCheckCanceledError, TriggerSource
from kustomize_controller.runtime.controller import Request

REQ = Request(namespace="ns", name="app")
SOURCE = TriggerSource(kind="GitRepository", namespace="ns", name="repo")


async def test_dispatch_cancels_the_running_wait_and_names_the_trigger() -> None:
    hooks = EnqueueHooks()
    cancelled = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with hooks.listen(REQ) as interrupt:
        racing = asyncio.create_task(interrupt.race(forever()))
        await asyncio.sleep(0)
        hooks.dispatch(Request(namespace="ns", name="other"), SOURCE)
        await asyncio.sleep(0)
        assert not racing.done()
        hooks.dispatch(REQ, SOURCE)
        with pytest.raises(HealthCheckCanceledError) as err:
            await racing
    assert err.value.source == SOURCE
    assert str(err.value.source) == "GitRepository/ns/repo"
    assert cancelled.is_set()
    assert len(hooks) == 0


async def test_first_trigger_wins_and_an_earlier_fire_cancels_at_once() -> None:
    hooks = EnqueueHooks()
    with hooks.listen(REQ) as interrupt:
        hooks.dispatch(REQ, SOURCE)
        hooks.dispatch(REQ, TriggerSource(kind="Kustomization", namespace="ns", name="app"))
        with pytest.raises(HealthCheckCanceledError) as err:
            await interrupt.race(asyncio.sleep(3600))
    assert err.value.source == SOURCE


async def test_result_is_returned_and_listener_removed() -> None:
    hooks = EnqueueHooks()

    async def value() -> int:
        return 7

    with hooks.listen(REQ) as interrupt:
        assert len(hooks) == 1
        assert await interrupt.race(value()) == 7
        assert not interrupt.fired
    assert len(hooks) == 0
    hooks.dispatch(REQ, SOURCE)  # nobody listening: nothing happens


async def test_errors_of_the_awaitable_propagate() -> None:
    async def boom() -> None:
        raise ValueError("x")

    with EnqueueHooks().listen(REQ) as interrupt, pytest.raises(ValueError):
        await interrupt.race(boom())


async def test_final_only_listeners_wait_for_deletion_or_suspension() -> None:
    hooks = EnqueueHooks()
    with hooks.listen(REQ, final_only=True) as released, hooks.listen(REQ) as gated:
        hooks.dispatch(REQ, SOURCE)  # a new revision: only the gate's listener cares
        assert gated.fired and not released.fired
        assert len(hooks) == 1
        owner = TriggerSource(kind="Kustomization", namespace="ns", name="app")
        hooks.dispatch(REQ, owner, final=True)
        assert released.fired and released.source == owner
        with pytest.raises(HealthCheckCanceledError):
            await released.race(asyncio.sleep(3600))
    assert len(hooks) == 0
