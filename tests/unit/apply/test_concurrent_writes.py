"""Phase B writes the objects of one kind ``concurrency`` at a time, the kinds one after the other
(apply/write.py): how many are in flight, in what order, and what a failure leaves."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from kustomize_controller.apply.errors import ApplyFailedError
from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
from kustomize_controller.apply.write import WRITE_MIN_OBJECTS
from kustomize_controller.kube.errors import InvalidError
from kustomize_controller.runtime.clock import FakeClock
from tests.unit.apply.fakes import FakeClient, cm
from tests.unit.loop import settle, until


def sa(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": "default"}}


class HeldWrites(FakeClient):
    """Real writes wait until released; the test sees which are in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight: list[str] = []
        self.most = 0
        self.release = asyncio.Event()
        self.order: list[str] = []

    async def apply(self, obj: Mapping[str, Any], *, field_manager: str, force: bool = True, dry_run: bool = False,
                    subresource: str | None = None) -> dict[str, Any]:
        if dry_run:
            return await super().apply(obj, field_manager=field_manager, force=force, dry_run=True)
        name = f"{obj['kind']}/{obj['metadata']['name']}"
        self.in_flight.append(name)
        self.most = max(self.most, len(self.in_flight))
        try:
            await self.release.wait()
            self.order.append(name)
            return await super().apply(obj, field_manager=field_manager, force=force)
        finally:
            self.in_flight.remove(name)


async def test_one_kind_is_written_concurrency_at_a_time() -> None:
    client = HeldWrites()
    rm = ResourceManager(client=client, clock=FakeClock(), concurrency=3)
    names = [f"cm-{i:02}" for i in range(WRITE_MIN_OBJECTS)]
    task = asyncio.create_task(rm.apply_all_staged([cm(n) for n in names], ApplyOptions()))
    await until(lambda: len(client.in_flight) == 3)
    await settle()
    assert client.in_flight == ["ConfigMap/cm-00", "ConfigMap/cm-01", "ConfigMap/cm-02"]
    client.release.set()
    change_set = await task
    assert client.most == 3
    assert [e.ref.name for e in change_set] == names  # the apply order


async def test_fewer_than_the_threshold_are_written_one_at_a_time_as_upstream() -> None:
    client = HeldWrites()
    client.release.set()
    client.faults[("apply", "cm-02", False)] = InvalidError("denied by webhook", status=422)
    rm = ResourceManager(client=client, clock=FakeClock(), concurrency=4)
    with pytest.raises(ApplyFailedError) as info:
        await rm.apply_all_staged([cm(f"cm-{i:02}") for i in range(WRITE_MIN_OBJECTS - 1)], ApplyOptions())
    assert client.most == 1
    assert [e.ref.name for e in info.value.change_set] == ["cm-00", "cm-01"]
    assert client.order == ["ConfigMap/cm-00", "ConfigMap/cm-01", "ConfigMap/cm-02"]  # none after the failed one


async def test_the_next_kind_waits_for_every_write_of_the_one_before() -> None:
    client = HeldWrites()
    rm = ResourceManager(client=client, clock=FakeClock(), concurrency=4)
    objects = [cm(f"cm-{i:02}") for i in range(WRITE_MIN_OBJECTS)] + [sa(f"a{i:02}") for i in range(WRITE_MIN_OBJECTS)]
    task = asyncio.create_task(rm.apply_all_staged(objects, ApplyOptions()))
    await until(lambda: len(client.in_flight) == 4)  # ServiceAccounts come first
    await settle()
    assert client.in_flight == [f"ServiceAccount/a{i:02}" for i in range(4)]
    client.release.set()
    await task
    assert [name.split("/")[0] for name in client.order] == (["ServiceAccount"] * WRITE_MIN_OBJECTS
                                                             + ["ConfigMap"] * WRITE_MIN_OBJECTS)


async def test_a_failed_write_starts_no_other_and_reports_the_first_in_apply_order() -> None:
    client = HeldWrites()
    client.release.set()
    client.faults[("apply", "cm-02", False)] = InvalidError("denied by webhook", status=422)
    client.faults[("apply", "cm-03", False)] = InvalidError("denied too", status=422)
    rm = ResourceManager(client=client, clock=FakeClock(), concurrency=2)
    with pytest.raises(ApplyFailedError) as info:
        await rm.apply_all_staged([sa("runner")] + [cm(f"cm-{i:02}") for i in range(WRITE_MIN_OBJECTS)],
                                  ApplyOptions())
    assert str(info.value) == "ConfigMap/default/cm-02 apply failed: denied by webhook"
    written = [e.ref.name for e in info.value.change_set]
    assert written[:3] == ["runner", "cm-00", "cm-01"]
    # at most the writes already in flight when cm-02 failed finish after it; none of the rest starts
    assert set(written[3:]) <= {"cm-03", "cm-04"}
    assert not {f"cm-{i:02}" for i in range(5, WRITE_MIN_OBJECTS)} & set(client.order)
    assert written == [e.ref.name for e in info.value.change_set]  # in apply order
