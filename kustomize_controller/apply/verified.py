"""Memory of objects proven in sync, so a no-op reconcile can skip their server-side dry-runs.

Upstream spends two requests per object on every periodic reconcile: a GET and a dry-run apply. The
dry-run only matters when something changed; ``VerifiedApplies`` lets the engine skip it when nothing
can have:

- ``remember(ref, fingerprint, live)`` is called after a dry-run proved the object *unchanged* (no
  drift, no managed-fields cleanup, no migration). It stores the live object's ``uid`` and
  ``resourceVersion`` together with the fingerprint of the desired manifest.
- ``is_verified(ref, fingerprint, live)`` is true only when the freshly read live object has the same
  ``uid`` and ``resourceVersion`` and the desired manifest (and every option that shapes the plan, see
  ``fingerprint``) is byte-for-byte the same as at that proof. The engine then plans the object as
  ``unchanged`` without a dry-run: one GET per object instead of two requests.

Why this keeps drift correction correct: any write to the object — a ``kubectl edit``, another
controller, a status update, a delete and re-create (new ``uid``) — changes the ``resourceVersion``
the API server returns, so the next reconcile does the dry-run again and reverts drift as before. A
changed manifest, field manager, ignore rule or cleanup rule changes the fingerprint, with the same
effect. Objects that were written are not remembered; the next reconcile verifies them with one
dry-run and only the one after skips it.

Restart safety: the memory is in-process only; a new controller (or a new ``VerifiedApplies``) starts
empty and pays the dry-runs once. Nothing else depends on it.

Bounds: at most ``max_entries`` objects (least recently used evicted first); an entry is the object's
reference and a 16-byte digest of (uid, resourceVersion, fingerprint), never an object body (about
350 bytes with the reference's strings, measured).

NOT promised: a mutating admission webhook (or an API server upgrade) that would now produce a
different dry-run result for an unchanged object and an unchanged manifest is not noticed until the
object or the manifest changes; upstream would notice it on the next interval. One instance may be
shared by concurrent reconciles (asyncio, single thread: every method is synchronous).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from typing import Any

from kustomize_controller.apply.objects import Object, ObjRef, resource_version, uid

DEFAULT_MAX_ENTRIES = 200_000


def fingerprint(desired: Object, *, context: str) -> str:
    """A digest of the desired manifest (canonical JSON) and ``context`` (field manager and options)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(context.encode())
    digest.update(b"\0")
    digest.update(json.dumps(desired, sort_keys=True, separators=(",", ":"), default=str).encode())
    return digest.hexdigest()


def _proof(object_uid: str, rv: str, print_: str) -> bytes:
    return hashlib.blake2b(f"{object_uid}\0{rv}\0{print_}".encode(), digest_size=16).digest()


class VerifiedApplies:
    """Per-object digest of (uid, resourceVersion, fingerprint) of the last dry-run that proved it unchanged."""

    def __init__(self, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self._max = max(1, max_entries)
        self._entries: OrderedDict[ObjRef, bytes] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def is_verified(self, ref: ObjRef, print_: str, live: Object | None) -> bool:
        if live is None:
            self.misses += 1
            return False
        entry = self._entries.get(ref)
        rv, object_uid = resource_version(live), uid(live)
        if entry is None or not rv or not object_uid or entry != _proof(object_uid, rv, print_):
            self.misses += 1
            return False
        self._entries.move_to_end(ref)
        self.hits += 1
        return True

    def remember(self, ref: ObjRef, print_: str, live: Object | None) -> None:
        if live is None:
            return
        rv, object_uid = resource_version(live), uid(live)
        if not rv or not object_uid:
            return
        self._entries[ref] = _proof(object_uid, rv, print_)
        self._entries.move_to_end(ref)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def forget(self, ref: ObjRef) -> None:
        self._entries.pop(ref, None)

    def clear(self) -> None:
        self._entries.clear()

    def stats(self) -> dict[str, Any]:
        return {"entries": len(self._entries), "hits": self.hits, "misses": self.misses}
