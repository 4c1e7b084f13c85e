"""Upstream's record against ours, aspect by aspect, and the differences we know of (pure functions).

For every case and aspect the two normalised records are compared. When they differ, the known
differences (``known.py``) that apply to the aspect are tried in turn: each rewrites both records the way
its documented difference explains (e.g. drops the event upstream sends and we deliberately do not). If the
records are then equal, the cell is *different, explained* (by those entries); otherwise it is
*unexplained*, which fails the run.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .harness import SideRecord

ASPECTS = ("conditions", "status", "inventory", "history", "objects", "ownership", "events", "notifications",
           "requeue", "metrics")
ASPECT_TITLES = {
    "conditions": "conditions",
    "status": "observedGeneration, revisions",
    "inventory": "inventory",
    "history": "history",
    "objects": "applied objects",
    "ownership": "field managers",
    "events": "Kubernetes events",
    "notifications": "events to --events-addr",
    "requeue": "next reconcile",
    "metrics": "metric series",
}

Transform = Callable[[str, str, Any, Any], tuple[Any, Any]]


@dataclass(frozen=True)
class Known:
    """A difference we know of: why, whether deliberate, where it is written, and how it shows."""

    id: str
    title: str
    deliberate: bool
    doc: str  # where it is documented (deliberate) or how it was resolved
    aspects: frozenset[str]
    transform: Transform
    cases: frozenset[str] | None = None  # None: any case


@dataclass
class Cell:
    aspect: str
    state: str  # "same", "explained", "unexplained", "n/a"
    explained_by: list[str] = field(default_factory=list)
    diff: str = ""


def aspect_data(record: SideRecord, aspect: str) -> Any:
    if aspect in ("conditions", "status", "inventory", "history"):
        return {label: {ks: data[aspect] for ks, data in cp.kustomizations.items()}
                for label, cp in record.checkpoints.items()}
    if aspect == "objects":
        return {label: cp.objects for label, cp in record.checkpoints.items()}
    if aspect == "ownership":
        return {label: cp.ownership for label, cp in record.checkpoints.items()}
    return getattr(record, aspect)


def _empty(value: Any) -> bool:
    if isinstance(value, dict):
        return all(_empty(v) for v in value.values())
    return value in (None, [], {}, "")


def render(value: Any) -> list[str]:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False, default=str).splitlines()


def diff_text(upstream: Any, ours: Any, *, limit: int = 80) -> str:
    lines = list(difflib.unified_diff(render(upstream), render(ours), "upstream", "ours", n=2, lineterm=""))
    if len(lines) > limit:
        lines = [*lines[:limit], f"... {len(lines) - limit} more lines"]
    return "\n".join(lines)


def compare_aspect(case: str, aspect: str, upstream: Any, ours: Any, known: Iterable[Known]) -> Cell:
    if upstream == ours:
        return Cell(aspect, "n/a" if _empty(upstream) else "same")
    explained_by = []
    for entry in known:
        if aspect not in entry.aspects or (entry.cases is not None and case not in entry.cases):
            continue
        new_upstream, new_ours = entry.transform(case, aspect, upstream, ours)
        if (new_upstream, new_ours) != (upstream, ours):
            explained_by.append(entry.id)
            upstream, ours = new_upstream, new_ours
        if upstream == ours:
            return Cell(aspect, "explained", explained_by)
    return Cell(aspect, "unexplained", explained_by, diff_text(upstream, ours))


def compare_case(case: str, upstream: SideRecord, ours: SideRecord, known: Iterable[Known]) -> dict[str, Cell]:
    entries = list(known)
    return {aspect: compare_aspect(case, aspect, aspect_data(upstream, aspect), aspect_data(ours, aspect), entries)
            for aspect in ASPECTS}


# ------------------------------------------------------------------------ helpers for known transforms


def map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [map_strings(v, fn) for v in value]
    return value


def drop_items(value: Any, predicate: Callable[[Any], bool]) -> Any:
    """Every list item (at any depth) for which ``predicate`` holds, removed."""
    if isinstance(value, list):
        return [drop_items(v, predicate) for v in value if not predicate(v)]
    if isinstance(value, dict):
        return {k: drop_items(v, predicate) for k, v in value.items()}
    return value
