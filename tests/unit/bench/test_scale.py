"""bench/scale.py: each shard's share of the CPUs (issue 27: shards emulate Deployments with a CPU limit)."""

from __future__ import annotations

import pytest

from bench.scale import layout, shard_cpus


@pytest.mark.parametrize(
    ("shards", "cpus", "want"),
    [
        (4, [0, 1], [{0}, {1}, {0}, {1}]),  # more shards than CPUs: shard i on CPU i mod c
        (2, [0, 1], [{0}, {1}]),
        (3, [5, 2, 7], [{2}, {5}, {7}]),  # the CPUs of the driver's affinity, in order
        (2, [0, 1, 2, 3, 4], [{0, 2, 4}, {1, 3}]),  # fewer shards than CPUs: as even a split as there is
        (1, [0, 1], [{0, 1}]),
    ],
)
def test_shard_cpus(shards: int, cpus: list[int], want: list[set[int]]) -> None:
    assert shard_cpus(shards, cpus) == [frozenset(w) for w in want]


def test_layout_names() -> None:
    assert [layout(1), layout(4), layout(4, 4), layout(4, 1)] == ["one", "shards4", "shards4", "shards4run1"]
    assert [layout(4, 9), layout(4, 0)] == ["shards4", "shards4run1"]  # at most all, at least one
