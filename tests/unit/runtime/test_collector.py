"""``SurvivorFreezer``: full collections walk only what is new, everything is walked again on time or
on growth, young collections are left alone, and ``close`` leaves the collector as it was. The last
two tests use the real :mod:`gc`: a frozen cycle outlives a full collection until the rescan."""

from __future__ import annotations

import asyncio
import gc
import weakref

from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.runtime.collector import COUNT_EVERY, Callback, SurvivorFreezer


class FakeGC:
    """Objects are counts: ``alive`` tracked and not frozen, ``frozen`` in the permanent generation."""

    def __init__(self) -> None:
        self.callbacks: list[Callback] = []
        self.alive = 0
        self.frozen = 0
        self.walked: list[int] = []  # objects each full collection walked
        self.counts = 0  # calls of get_freeze_count (each walks the frozen list in CPython)

    def freeze(self) -> None:
        self.frozen += self.alive
        self.alive = 0

    def unfreeze(self) -> None:
        self.alive += self.frozen
        self.frozen = 0

    def get_freeze_count(self) -> int:
        self.counts += 1
        return self.frozen

    def collect(self, generation: int = 2) -> None:
        info = {"generation": generation, "collected": 0, "uncollectable": 0}
        for cb in list(self.callbacks):
            cb("start", info)
        if generation == 2:
            self.walked.append(self.alive)
        for cb in list(self.callbacks):
            cb("stop", info)


def _freezer(fake: FakeGC, clock: FakeClock, **kw: float) -> SurvivorFreezer:
    freezer = SurvivorFreezer(clock=clock, collector=fake, **kw)
    freezer.install()
    return freezer


def test_a_full_collection_walks_only_what_came_after_the_last_one() -> None:
    fake, clock = FakeGC(), FakeClock()
    freezer = _freezer(fake, clock)
    fake.alive = 1000  # the caches after their first sync
    fake.collect()
    assert fake.walked == [1000] and fake.frozen == 1000 and fake.alive == 0
    fake.alive = 300  # new survivors since
    fake.collect()
    assert fake.walked == [1000, 300]
    assert fake.frozen == 1300
    assert (freezer.whole_collections, freezer.frozen_collections) == (1, 1)


def test_young_collections_are_left_alone() -> None:
    fake, clock = FakeGC(), FakeClock()
    _freezer(fake, clock)
    fake.alive = 50
    fake.collect(0)
    fake.collect(1)
    assert fake.frozen == 0 and fake.alive == 50 and fake.walked == []


def test_everything_is_walked_again_once_the_rescan_interval_has_passed() -> None:
    fake, clock = FakeGC(), FakeClock()
    freezer = _freezer(fake, clock, rescan_every=600.0)
    fake.alive = 1000
    fake.collect()
    fake.alive = 10
    asyncio.run(clock.advance(599.0))
    fake.collect()
    assert fake.walked[-1] == 10  # not yet due
    fake.alive = 10
    asyncio.run(clock.advance(1.0))
    fake.collect()
    assert fake.walked[-1] == 1020  # the frozen 1,010 and the 10 new ones
    assert freezer.whole_collections == 2
    fake.alive = 5
    fake.collect()
    assert fake.walked[-1] == 5  # the interval starts again from that walk


def test_everything_is_walked_again_once_the_frozen_set_has_doubled() -> None:
    fake, clock = FakeGC(), FakeClock()
    freezer = _freezer(fake, clock, rescan_growth=2.0)
    fake.alive = 1000
    fake.collect()
    fake.alive = 900
    asyncio.run(clock.advance(COUNT_EVERY))
    fake.collect()  # 1,000 frozen at its start: not more than twice 1,000
    assert fake.walked[-1] == 900
    fake.alive = 200
    asyncio.run(clock.advance(COUNT_EVERY))
    fake.collect()  # 1,900 frozen at its start: still not
    assert fake.walked[-1] == 200
    fake.alive = 1
    asyncio.run(clock.advance(COUNT_EVERY))
    fake.collect()  # 2,100 frozen: more than twice what the last whole walk left
    assert fake.walked[-1] == 2101
    assert freezer.whole_collections == 2


def test_the_frozen_objects_are_counted_once_per_interval_at_most() -> None:
    fake, clock = FakeGC(), FakeClock()
    _freezer(fake, clock, rescan_growth=2.0)
    fake.alive = 1000
    fake.collect()
    counted = fake.counts
    fake.alive = 5000  # grown past twice, but too soon after the last count to look
    fake.collect()
    fake.collect()
    assert fake.counts == counted and fake.walked[-2:] == [5000, 0]
    asyncio.run(clock.advance(COUNT_EVERY))
    fake.collect()  # now it looks, and walks everything
    assert fake.counts > counted and fake.walked[-1] == 6000


def test_close_removes_the_callback_and_unfreezes() -> None:
    fake, clock = FakeGC(), FakeClock()
    freezer = _freezer(fake, clock)
    fake.alive = 100
    fake.collect()
    freezer.close()
    assert fake.callbacks == [] and fake.frozen == 0 and fake.alive == 100
    fake.collect()
    assert fake.frozen == 0  # no longer freezing
    freezer.close()  # twice is harmless


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_with_the_real_collector_a_frozen_cycle_lives_until_the_next_whole_walk() -> None:
    clock = FakeClock()
    freezer = SurvivorFreezer(clock=clock, rescan_every=600.0, rescan_growth=1e9)
    freezer.install()
    try:
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        ref = weakref.ref(a)
        gc.collect()  # nothing frozen yet: a whole walk; the cycle is alive, so it is frozen
        assert gc.get_freeze_count() > 0
        del a, b  # now a garbage cycle, but in the permanent generation
        gc.collect()
        assert ref() is not None  # the cost: not reclaimed while frozen
        assert freezer.frozen_collections == 1
        asyncio.run(clock.advance(600.0))
        gc.collect()  # due: it unfreezes at its start and walks everything
        assert ref() is None
        assert freezer.whole_collections == 2
    finally:
        freezer.close()
    assert gc.get_freeze_count() == 0
    assert len([cb for cb in gc.callbacks if getattr(cb, "__self__", None) is freezer]) == 0
