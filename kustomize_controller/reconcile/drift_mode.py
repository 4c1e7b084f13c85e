"""``drift-detection: warn``: which drifted objects are left alone, and the record that decides it.

An existing object whose dry-run shows a change is either *drifted* (changed out of band) or *changed*
(its desired state moved since it was last applied). Only the first is left unwritten in warn mode;
the second is applied so a new revision still rolls out. Telling them apart needs a record of what
was last applied per object. It has three layers, asked in this order:

1. **Per-object memory** (``AppliedRecords``, in-process): per Kustomization (by uid), the fingerprint
   of each object's desired manifest — as the engine sees it: built, decrypted, substituted, with owner
   labels — as of the last reconcile that applied it, proved it in sync, or left it drifted. An object
   whose fingerprint equals its record is unchanged; one whose fingerprint differs is changed.
2. **The last applied build digest** (persisted in ``status.history``): when the memory has nothing
   for an object (the controller restarted, or the object was never seen in warn mode), the object is
   unchanged exactly when the whole build's digest equals the digest of the most recent history entry
   and that entry is a reconcile that applied every object (``ReconciliationSucceeded``,
   ``HealthCheckFailed``, ``PruneFailed``). Upstream writes the same digest.
3. **What the server says we own** (``apply/ownership.py``): for a new build without memory (after a
   restart), an existing object is unchanged when its managed fields prove it: every field our Apply
   entry owns is still desired with its live value, and every desired field we no longer own was
   taken by another manager. Nothing new is stored in the cluster by any layer.

What is promised: drift is never corrected while the build is the one last applied, across restarts
included; a new revision applies what changed in it and leaves drifted, unchanged objects alone —
from memory while the process runs, from the managed fields after a restart. Not promised: after a
restart, an object deleted out of band or a field removed out of band cannot be told from a new
desired one, so the new build re-creates it (the safe direction); and a field a new revision adds or
changes while another manager already owns it counts as drift (``ownership.py``). The same holds
after a reconcile whose apply failed half way. The memory is updated only in warn mode and dropped in
enabled mode, so it never outlives a switch.

Bounds: one entry per object of a warn-mode Kustomization (reference + 16-byte digest), at most
``max_kustomizations`` Kustomizations (least recently used dropped first: they fall back to layer 2).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence

from kustomize_controller.api.meta import Reason, Snapshot
from kustomize_controller.apply.detect_only import HeldDrift
from kustomize_controller.apply.manager import strip_invalid_ca_bundle
from kustomize_controller.apply.objects import Object, ObjRef, deep_copy
from kustomize_controller.apply.ownership import provably_unchanged
from kustomize_controller.apply.staging import is_crd
from kustomize_controller.apply.takeover import CONTROLLER_NAME

#: history outcomes after which every object of the build was applied (or left drifted on purpose)
APPLIED_OUTCOMES = frozenset({Reason.RECONCILIATION_SUCCEEDED, Reason.HEALTH_CHECK_FAILED, Reason.PRUNE_FAILED})
DEFAULT_MAX_KUSTOMIZATIONS = 10_000


def desired_fingerprint(obj: Object) -> bytes:
    """A digest of the desired manifest, normalised as the engine normalises it before the dry-run."""
    if is_crd(obj):
        obj = deep_copy(obj)
        strip_invalid_ca_bundle(obj)
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def last_applied_digest(history: Sequence[Snapshot]) -> str | None:
    """The build digest of the most recent reconcile, when that reconcile applied every object."""
    if not history:
        return None
    latest = history[0]  # upsert keeps the most recent entry first
    return latest.digest if latest.last_reconciled_status in APPLIED_OUTCOMES else None


def warn_policy(history: Sequence[Snapshot], *, digest: str, known: Mapping[ObjRef, bytes]) -> WarnPolicy:
    """The engine's policy for a warn-mode apply of the build ``digest``: layer 1 is ``known``, layer 2
    the last applied digest in ``history``."""
    applied = last_applied_digest(history)
    return WarnPolicy(known=known, build_unchanged=applied is not None and applied == digest)


class AppliedRecords:
    """Per-Kustomization ``ObjRef`` → fingerprint of the desired manifest last applied (layer 1)."""

    def __init__(self, *, max_kustomizations: int = DEFAULT_MAX_KUSTOMIZATIONS) -> None:
        self._max = max(1, max_kustomizations)
        self._records: OrderedDict[str, dict[ObjRef, bytes]] = OrderedDict()

    def get(self, owner: str) -> dict[ObjRef, bytes]:
        record = self._records.get(owner)
        if record is None:
            return {}
        self._records.move_to_end(owner)
        return dict(record)

    def put(self, owner: str, record: Mapping[ObjRef, bytes]) -> None:
        self._records[owner] = dict(record)
        self._records.move_to_end(owner)
        while len(self._records) > self._max:
            self._records.popitem(last=False)

    def forget(self, owner: str) -> None:
        self._records.pop(owner, None)

    def __len__(self) -> int:
        return len(self._records)


class WarnPolicy:
    """The engine's ``DriftPolicy`` for one warn-mode reconcile (module contract)."""

    def __init__(
        self, *, known: Mapping[ObjRef, bytes], build_unchanged: bool, field_manager: str = CONTROLLER_NAME
    ) -> None:
        self._known = known
        self._build_unchanged = build_unchanged
        self._field_manager = field_manager
        self.drifts: list[HeldDrift] = []

    def unchanged(
        self, ref: ObjRef, desired: Object, *, live: Object | None = None, dry_run: Object | None = None
    ) -> bool:
        recorded = self._known.get(ref)
        if recorded is not None:
            return recorded == desired_fingerprint(desired)
        if self._build_unchanged:
            return True
        if live is None or dry_run is None:
            return False
        return provably_unchanged(live, dry_run, manager=self._field_manager)

    def held(self, drift: HeldDrift) -> None:
        self.drifts.append(drift)


def next_record(
    previous: Mapping[ObjRef, bytes], objects: Iterable[Object], *, written: Iterable[ObjRef] | None = None
) -> dict[ObjRef, bytes]:
    """The record after a reconcile: every desired object's fingerprint (``written=None``: the apply
    succeeded), or — after a failed apply — the previous record updated for the objects written."""
    prints = {ObjRef.from_object(o): desired_fingerprint(o) for o in objects}
    if written is None:
        return prints
    record = dict(previous)
    for ref in written:
        if ref in prints:
            record[ref] = prints[ref]
    return record
