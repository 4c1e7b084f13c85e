"""The metric series both controllers export, compared by name and label names (values never)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from e2e.harness import scrape

from . import compare

__all__ = ["compare_pages", "families", "scrape"]


def families(samples: Iterable[tuple[str, Mapping[str, str]]]) -> dict[str, list[str]]:
    """Sample name -> the sorted, distinct label-name sets it is exported with; for a histogram's buckets
    also its ``le`` values and for a summary its quantiles (``<name>{le}``): they are label values a query
    names."""
    found: dict[str, set[str]] = {}
    for name, labels in samples:
        found.setdefault(name, set()).add(",".join(sorted(labels)))
        for bound in ("le", "quantile"):
            if bound in labels:
                found.setdefault(f"{name}{{{bound}}}", set()).add(labels[bound])
    return {name: sorted(sets) for name, sets in sorted(found.items())}


def compare_pages(pages: Mapping[str, Mapping[str, Any]], known: Iterable[compare.Known]) -> dict[str, compare.Cell]:
    """Per profile: every sample name and its label names, upstream's page against ours."""
    entries = list(known)
    cells = {}
    for profile, sides in pages.items():
        upstream = families(sides["upstream"])
        ours = families(sides["ours"])
        cells[profile] = compare.compare_aspect("controller", "controller-metrics", upstream, ours, entries)
    return cells
