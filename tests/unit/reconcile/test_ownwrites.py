"""Read your own writes (``reconcile/ownwrites.py``): a cached copy older than our last write is read again."""

from __future__ import annotations

from typing import Any

import pytest

from kustomize_controller.reconcile.ownwrites import OwnWrites


def ks(rv: str, name: str = "app") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


class Live:
    def __init__(self, obj: dict[str, Any] | None) -> None:
        self.obj = obj
        self.reads = 0

    async def __call__(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads += 1
        return self.obj


class Client:
    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer

    async def patch(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return self.answer


async def test_nothing_written_trusts_the_cache() -> None:
    live = Live(ks("9"))
    writes = OwnWrites(live)
    assert await writes.fresh(ks("5")) == ks("5")
    assert live.reads == 0


async def test_a_cache_behind_our_write_is_read_again_then_trusted_once_caught_up() -> None:
    live = Live(ks("12"))
    writes = OwnWrites(live)
    await writes.patcher(Client(ks("12"))).patch("v1", "K", "app", "ns", {}, patch_type="merge")
    assert await writes.fresh(ks("10")) == ks("12")  # the cache missed our write
    assert await writes.fresh(ks("12")) == ks("12")  # caught up: no further read
    assert live.reads == 1


async def test_gone_forgets() -> None:
    live = Live(None)
    writes = OwnWrites(live)
    writes.record(ks("3"))
    assert await writes.fresh(ks("2")) is None
    live.obj = ks("7")
    assert await writes.fresh(ks("2")) == ks("2")  # nothing recorded any more
    assert live.reads == 1


async def test_each_object_has_its_own_record() -> None:
    live = Live(ks("4", "other"))
    writes = OwnWrites(live)
    writes.record(ks("3"))
    assert await writes.fresh(ks("1", "other")) == ks("1", "other")
    writes.forget("ns", "app")
    assert await writes.fresh(ks("1")) == ks("1")
    assert live.reads == 0


class Failing:
    """A write whose answer never arrives (a timeout, a dropped connection): it may have been stored."""

    async def patch(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise TimeoutError("no answer")


async def test_a_write_without_an_answer_makes_the_cache_untrusted_until_read_again() -> None:
    live = Live(ks("12"))
    writes = OwnWrites(live)
    await writes.patcher(Client(ks("10"))).patch("v1", "K", "app", "ns", {}, patch_type="merge")
    with pytest.raises(TimeoutError):
        await writes.patcher(Failing()).patch("v1", "K", "app", "ns", {}, patch_type="merge")
    # the server stored it as "12"; the cache still shows our last answered write, "10"
    assert await writes.fresh(ks("10")) == ks("12")
    assert await writes.fresh(ks("12")) == ks("12")
    assert live.reads == 1


async def test_a_cache_that_showed_our_write_is_trusted_when_ahead() -> None:
    live = Live(ks("12"))
    writes = OwnWrites(live)
    await writes.patcher(Client(ks("10"))).patch("v1", "K", "app", "ns", {}, patch_type="merge")
    writes.observed(ks("10"))  # the watch delivered our write
    assert await writes.fresh(ks("12")) == ks("12")  # someone else's change after it (requestedAt)
    assert live.reads == 0


async def test_an_event_of_another_version_keeps_the_record() -> None:
    live = Live(ks("12"))
    writes = OwnWrites(live)
    await writes.patcher(Client(ks("10"))).patch("v1", "K", "app", "ns", {}, patch_type="merge")
    writes.observed(ks("9"))  # an older event still on its way: the cache has not shown our write
    writes.observed(ks("11"))  # a relist that skipped our version: cannot tell whether it includes it
    assert await writes.fresh(ks("11")) == ks("12")
    assert live.reads == 1


async def test_an_unanswered_write_is_never_observed() -> None:
    live = Live(ks("12"))
    writes = OwnWrites(live)
    writes.unanswered("ns", "app")
    writes.observed(ks("11"))
    assert await writes.fresh(ks("11")) == ks("12")
    assert live.reads == 1


async def test_an_event_before_the_answer_costs_one_read() -> None:
    live = Live(ks("12"))
    writes = OwnWrites(live)
    writes.observed(ks("10"))  # the watch was faster than the PATCH's answer
    await writes.patcher(Client(ks("10"))).patch("v1", "K", "app", "ns", {}, patch_type="merge")
    assert await writes.fresh(ks("10")) == ks("10")  # the cache shows it: trusted
    assert await writes.fresh(ks("12")) == ks("12")  # one read once it moved on without us seeing ours
    assert live.reads == 1


async def test_first_read_live_reads_each_object_once_then_trusts_the_cache_that_shows_it() -> None:
    """A standby that took over: its cache may miss the old leader's last writes (a stale inventory)."""
    live = Live(ks("12"))
    writes = OwnWrites(live, first_read_live=True)
    assert await writes.fresh(ks("5")) == ks("12")  # the cache lags: the API server's copy
    assert await writes.fresh(ks("7")) == ks("12")  # still behind what we read: read again
    assert await writes.fresh(ks("12")) == ks("12")
    writes.observed(ks("12"))
    assert await writes.fresh(ks("12")) == ks("12")
    assert await writes.fresh(ks("13")) == ks("13")  # a later change by someone else: trusted
    assert live.reads == 2


async def test_first_read_live_counts_our_own_write_as_a_read() -> None:
    live = Live(ks("20"))
    writes = OwnWrites(live, first_read_live=True)
    await writes.patcher(Client(ks("20"))).patch("v1", "K", "app", "ns", {}, patch_type="merge")
    writes.observed(ks("20"))
    assert await writes.fresh(ks("20")) == ks("20")
    assert live.reads == 0
    writes.forget("ns", "app")  # gone, and created again: read it once more
    assert await writes.fresh(ks("3")) == ks("20")
    assert live.reads == 1
