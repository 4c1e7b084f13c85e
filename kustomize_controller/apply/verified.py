"""Memory of objects proven in sync, so a reconcile can skip their server-side dry-runs.

Upstream spends two requests per object on every periodic reconcile: a GET and a dry-run apply. The
dry-run only matters when something changed; ``VerifiedApplies`` lets the engine skip it when nothing
can have:

- ``remember(ref, fingerprint, live)`` is called after a dry-run proved the object *unchanged* (no
  drift, no managed-fields cleanup, no migration), and after a server-side apply of the desired
  manifest wrote it (``live`` is then the apply's answer: the object exactly as that apply left it,
  which a dry-run of the same manifest would find unchanged). It stores two proofs of the live object
  together with the fingerprint of the desired manifest:
  * the exact state: ``uid`` and ``resourceVersion``;
  * the main-resource state, for kinds that keep ``metadata.generation``: ``uid``, ``generation``,
    ``labels``, ``annotations``, ``finalizers``, ``ownerReferences``, ``deletionTimestamp`` and every
    ``managedFields`` entry that is not for the ``status`` subresource (manager, operation, version,
    fields and time).
- ``is_verified(ref, fingerprint, live)`` is true when the freshly read live object matches either
  proof and the desired manifest (and every option that shapes the plan, see ``fingerprint``) is
  byte-for-byte the same as at the proof. The engine then plans the object as ``unchanged`` without a
  dry-run: one GET per object instead of two requests.

Why the second proof: on a real cluster the Deployment controller (and every other workload
controller) writes the status of what we applied, through the ``status`` subresource, whenever its
pods change — which changes the resourceVersion without any change to what we own, so the exact proof
alone would miss most workload objects most intervals. A write through the ``status`` subresource
never moves the spec or the generation (the API server takes the spec from the stored object) and its
managed-fields entry is the one the proof leaves out. Some built-in status strategies let metadata
through (the Deployment controller writes its ``deployment.kubernetes.io/revision`` annotation with
``UpdateStatus``): labels and annotations owned only by ``status`` entries are left out of the proof
too. Any main-resource writer that touches such a key takes a share of it in its own entry, which the
proof lists.

Why drift correction stays correct: any write to the main resource that changes the object — a
``kubectl edit``, another controller, a ``kubectl apply`` whose fields a takeover would claim — updates
its writer's ``managedFields`` entry (fields, and the time, to the second) and, for a change of the
spec, the generation (every built-in kind that keeps a generation bumps it on spec changes, a custom
resource on any change outside metadata, and status too without the subresource). A delete and
re-create changes the ``uid``. Kinds without a generation (ConfigMap, Secret, Service,
ServiceAccount, RBAC…) and objects read without managed fields only have the exact proof: any write
at all makes the next reconcile dry-run them again. A changed manifest, field manager, ignore rule
or cleanup rule changes the fingerprint, with the same effect.

Restart safety: the memory is in-process only; a new controller (or a new ``VerifiedApplies``) starts
empty and pays the dry-runs once. Nothing else depends on it.

Bounds: at most ``max_entries`` objects (least recently used evicted first); an entry is the object's
reference and two 16-byte digests, never an object body.

NOT promised: a mutating admission webhook (or an API server upgrade) that would now produce a
different dry-run result for an unchanged object and an unchanged manifest is not noticed until the
object or the manifest changes; upstream would notice it on the next interval. Two main-resource
writes by one manager within one second, both changing only fields the generation does not track and
the proof does not list, look like one to the second proof (no such field exists on the kinds we know).
One instance may be shared by concurrent reconciles (asyncio, single thread: every method is
synchronous).
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


def _status_owned_metadata(managed: list[Any]) -> tuple[set[str], set[str]]:
    """Label and annotation keys that a ``status``-subresource writer owns and no main-resource writer
    does: the Deployment controller writes ``deployment.kubernetes.io/revision`` with its status."""
    owned: dict[bool, tuple[set[str], set[str]]] = {True: (set(), set()), False: (set(), set())}
    for entry in managed:
        if not isinstance(entry, dict):
            continue
        fields = (entry.get("fieldsV1") or {}).get("f:metadata") or {}
        labels, annotations = owned[entry.get("subresource") == "status"]
        labels.update(k[2:] for k in (fields.get("f:labels") or {}) if k.startswith("f:"))
        annotations.update(k[2:] for k in (fields.get("f:annotations") or {}) if k.startswith("f:"))
    return owned[True][0] - owned[False][0], owned[True][1] - owned[False][1]


def _main_resource_proof(live: Object, print_: str) -> bytes | None:
    """The digest of what a write to the main resource changes (see the module contract), or ``None``
    for objects without a generation or read without managed fields."""
    meta = live.get("metadata")
    if not isinstance(meta, dict):
        return None
    generation = meta.get("generation")
    managed = meta.get("managedFields")
    if not isinstance(generation, int) or generation <= 0 or not isinstance(managed, list) or not managed:
        return None
    main = [e for e in managed if isinstance(e, dict) and e.get("subresource") != "status"]
    status_labels, status_annotations = _status_owned_metadata(managed)
    state = [
        meta.get("uid"),
        generation,
        {k: v for k, v in (meta.get("labels") or {}).items() if k not in status_labels},
        {k: v for k, v in (meta.get("annotations") or {}).items() if k not in status_annotations},
        meta.get("finalizers") or [],
        meta.get("ownerReferences") or [],
        meta.get("deletionTimestamp"),
        main,
        print_,
    ]
    digest = hashlib.blake2b(digest_size=16)
    digest.update(json.dumps(state, sort_keys=True, separators=(",", ":"), default=str).encode())
    return digest.digest()


class VerifiedApplies:
    """Per-object proofs of the last dry-run (or apply) that left it as the desired manifest wants."""

    def __init__(self, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self._max = max(1, max_entries)
        self._entries: OrderedDict[ObjRef, tuple[bytes, bytes | None]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def knows(self, ref: ObjRef) -> bool:
        """Whether a proof of ``ref`` is kept (``is_verified`` may then hold)."""
        return ref in self._entries

    def is_verified(self, ref: ObjRef, print_: str, live: Object | None) -> bool:
        if live is None:
            return False
        entry = self._entries.get(ref)
        rv, object_uid = resource_version(live), uid(live)
        if entry is None or not rv or not object_uid:
            return False
        exact, main = entry
        if exact != _proof(object_uid, rv, print_) and (main is None or main != _main_resource_proof(live, print_)):
            return False
        self._entries.move_to_end(ref)
        return True

    def remember(self, ref: ObjRef, print_: str, live: Object | None) -> None:
        if live is None:
            return
        rv, object_uid = resource_version(live), uid(live)
        if not rv or not object_uid:
            return
        self._entries[ref] = (_proof(object_uid, rv, print_), _main_resource_proof(live, print_))
        self._entries.move_to_end(ref)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def forget(self, ref: ObjRef) -> None:
        self._entries.pop(ref, None)

    def clear(self) -> None:
        self._entries.clear()
