"""A plan: what a reconcile would write to the cluster, with a short id a person can approve.

``plan_of(revision, changes)`` keeps the changes of a dry-run preview (``apply/preview.py``) that write:
``created``, ``configured``, ``recreated`` and ``deleted`` (prune). Its id is the first 12 hex digits
of a BLAKE2b digest over the revision and, per change in a stable order, the action, the object, its
API version, the digest of its desired manifest and the field paths that differ. So the id changes
with a new revision, a spec or substitution change (another desired manifest), new drift on another
field or object, an object to prune — and does not change with what a reconcile leaves alone
(``resourceVersion``, status, fields no one manages). Secret values enter only through the one-way
digest of the desired manifest. An approval names an id; the reconcile applies only when the plan it
computes has that id (``decision.py``), once (``approval.py``).

``Plan.live`` fingerprints the live state the plan was computed against: 16 hex digits of a digest over
each change's object and the ``resourceVersion`` its GET read (``absent`` for an object to create). It is
not part of the id (nothing a person approves); any write to one of the plan's objects changes it, which is
how a reconcile after a crash tells an approved plan not yet written from one partly or fully written.

The plan's text for conditions: ``plan 3f2a9c1b7d04 (2 created, 1 configured, 1 deleted)``; the id is
read back from a condition message by ``plan_id_in``. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from kustomize_controller.apply.preview import RECREATED, PreviewChange

_WRITES = ("created", "configured", RECREATED, "deleted")
_ID_LENGTH = 12
_LIVE_BYTES = 8
_ID_IN_MESSAGE = re.compile(r"\bplan ([0-9a-f]{12})\b")


@dataclass(frozen=True)
class PlanItem:
    action: str
    subject: str  # Kind/namespace/name
    api_version: str
    desired: str = ""
    paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    revision: str
    id: str
    items: tuple[PlanItem, ...]
    live: str = ""  # the fingerprint of the live objects it was computed against (module contract)

    @property
    def empty(self) -> bool:
        return not self.items

    def counts(self) -> dict[str, int]:
        out = {action: 0 for action in _WRITES}
        for item in self.items:
            out[item.action] += 1
        return out

    def counts_text(self) -> str:
        """``2 created, 1 configured, 1 deleted`` (actions with none left out; ``no changes``)."""
        parts = [f"{n} {action}" for action, n in self.counts().items() if n]
        return ", ".join(parts) if parts else "no changes"

    def describe(self) -> str:
        return f"plan {self.id} ({self.counts_text()})"


def plan_of(revision: str, changes: Iterable[PreviewChange]) -> Plan:
    """The plan of a preview's ``changes`` for ``revision`` (module contract)."""
    writes = [c for c in changes if c.action in _WRITES]
    items = tuple(sorted(
        (PlanItem(action=c.action, subject=str(c.ref), api_version=c.api_version, desired=c.desired,
                  paths=tuple(sorted(c.paths)))
         for c in writes),
        key=lambda i: (i.subject, i.api_version, i.action),
    ))
    live = json.dumps(sorted([str(c.ref), c.api_version, c.action, c.live_version or "absent"] for c in writes),
                      separators=(",", ":"))
    canonical = json.dumps(
        {"revision": revision, "items": [[i.action, i.subject, i.api_version, i.desired, list(i.paths)]
                                         for i in items]},
        sort_keys=True, separators=(",", ":"),
    )
    return Plan(revision=revision, id=hashlib.blake2b(canonical.encode()).hexdigest()[:_ID_LENGTH], items=items,
                live=hashlib.blake2b(live.encode(), digest_size=_LIVE_BYTES).hexdigest())


def plan_id_in(message: str) -> str:
    """The plan id a condition message names (``""`` when none)."""
    found = _ID_IN_MESSAGE.search(message or "")
    return found.group(1) if found else ""
