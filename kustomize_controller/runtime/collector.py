"""Full garbage collections that skip what an earlier one already found alive.

CPython's cycle collector is generational: a full collection (generation 2) walks every container
object of the process. With thousands of Kustomizations most of those are the informer caches —
decoded JSON, acyclic, freed by reference counting the moment an update replaces them — so each full
collection mostly re-proves that the caches are alive. At 10,000 Kustomizations a full collection took
0.35–0.47 s, 30 of them a quarter of a no-op round (``docs/benchmarks.md``, issue 27).

``SurvivorFreezer`` moves the survivors of every full collection to the permanent generation
(``gc.freeze``), so the next one walks only what was allocated (and survived the young collections)
since. What it costs: a reference cycle that becomes garbage while frozen is not reclaimed until the
permanent generation is walked again. So every ``rescan_every`` seconds (clock time), or once the frozen
set has grown to ``rescan_growth`` times its size after the last whole walk (looked at every
``COUNT_EVERY`` seconds at most: counting walks the frozen list), the next full collection
starts by unfreezing everything (``gc.unfreeze`` in its ``start`` callback) and walks it all — leaked
cycles live at most that long, and the whole walks cost O(1) per object over time.

Young collections and the thresholds are untouched. ``close()`` removes the callback and unfreezes,
leaving the process's collector as it found it (tests run several controllers in one process).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Literal, Protocol

from kustomize_controller.runtime.clock import Clock

FULL = 2  # the oldest generation: a collection of it walks every tracked object not frozen
COUNT_EVERY = 10.0  # seconds between two counts of the frozen objects (each walks their list)

Callback = Callable[[Literal["start", "stop"], dict[str, int]], object]  # as typeshed types gc.callbacks


class Collector(Protocol):
    """What is used of the :mod:`gc` module (a fake in tests)."""

    callbacks: list[Callback]

    def freeze(self) -> None: ...

    def unfreeze(self) -> None: ...

    def get_freeze_count(self) -> int: ...


class SurvivorFreezer:
    """Freezes the survivors of each full collection; rescans everything now and then."""

    def __init__(
        self,
        *,
        clock: Clock,
        rescan_every: float = 600.0,
        rescan_growth: float = 2.0,
        collector: Collector = gc,
    ) -> None:
        self._clock = clock
        self._rescan_every = rescan_every
        self._rescan_growth = rescan_growth
        self._gc = collector
        self._last_whole = clock.monotonic()
        self._last_count = self._last_whole
        self._frozen_after_whole = 0
        self._froze = False  # this freezer has frozen something since it was installed
        self._whole = False  # the collection in progress walks the unfrozen everything
        self._installed = False
        self.frozen_collections = 0  # full collections that walked only the unfrozen part
        self.whole_collections = 0  # full collections that walked everything

    def install(self) -> None:
        if not self._installed:
            self._gc.callbacks.append(self._on_collection)
            self._installed = True

    def close(self) -> None:
        if self._installed:
            self._gc.callbacks.remove(self._on_collection)
            self._installed = False
            self._gc.unfreeze()
            self._froze = False

    def _due(self) -> bool:
        """Whether the collection about to start should walk everything. Counting the frozen objects
        walks their list, so the growth is looked at once per ``COUNT_EVERY`` seconds at most."""
        if not self._froze:
            return True  # nothing frozen yet: it walks everything anyway
        now = self._clock.monotonic()
        if now - self._last_whole >= self._rescan_every:
            return True
        if now - self._last_count < COUNT_EVERY:
            return False
        self._last_count = now
        return self._gc.get_freeze_count() > self._rescan_growth * self._frozen_after_whole

    def _on_collection(self, phase: Literal["start", "stop"], info: dict[str, int]) -> None:
        if info.get("generation") != FULL:
            return
        if phase == "start":
            self._whole = self._due()
            if self._whole:
                self._gc.unfreeze()
            return
        self._gc.freeze()
        self._froze = True
        if self._whole:
            self._whole = False
            self.whole_collections += 1
            self._last_whole = self._clock.monotonic()
            self._frozen_after_whole = self._gc.get_freeze_count()
        else:
            self.frozen_collections += 1
