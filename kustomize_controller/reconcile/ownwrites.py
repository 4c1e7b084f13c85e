"""Read your own writes: never reconcile from a cached Kustomization older than the controller's own last
write to it.

The reconciler reads the Kustomization from the informer cache, which trails the API server by however
long the watch takes to deliver — after an API server fail-over (a lagging watch cache) or a watch that
ended and is being re-established (relist after 410), that can be seconds and several writes. Acting on
such a copy goes wrong in ways a retry does not repair: the previous inventory in its status is older
than the one last written, so a new revision prunes against the wrong set (an object removed from the
source stays, orphaned, while the new inventory no longer lists it), and the status merge patch is
computed against an outdated base. Found by the fault-injection tests (``tests/integration/faults``,
``expire@2`` of the ``revision`` scenario).

Contract: ``OwnWrites`` remembers, per Kustomization, the resourceVersion of the controller's last
successful write to it (status or finalizers). ``fresh(cached)`` returns the cached object when it is that
version (the cache has caught up) or when nothing was written since the controller started (a fresh
informer's list is a consistent read), and otherwise reads it from the API server (one GET; resource
versions are opaque, so a cache that is *ahead* also costs that GET once). A write that raised (a timeout,
a dropped connection: the server may have stored it without us seeing the answer) leaves no version to
wait for: the next ``fresh`` reads the object from the API server whatever the cache shows. The record
is forgotten when the object is gone. Bounded by the number of Kustomizations written.

With ``first_read_live`` (leader election: the informer was filled while this replica stood by, and its
watch may lag behind what the previous leader wrote last — after a hand-over a cached inventory older
than the old leader's last status write orphans what a new revision drops, found by the ``lease+lag``
faults of ``tests/integration/faults``), the first ``fresh`` of each Kustomization reads it from the API
server too, and the cache is trusted for it only once it has shown that version (or one of our own
writes); one GET per Kustomization per leadership. Without it, an informer's list is a consistent read
made when the controller started, and everything since reaches it in order.

``observed(obj)`` is told every object the informer stores (add and update events, in watch order): once
the cache has shown our last write's version, the record is dropped, so a later change by someone else
(a ``requestedAt`` annotation: the cache is *ahead*) is trusted without that GET. A watch delivers
every version of an object in order, so whatever the cache holds after that event includes our write. A
relist that skips the version (410) leaves the record, which costs one GET as before; so does an event
that arrives before the write's answer is recorded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kustomize_controller.kube.client import PatchType
from kustomize_controller.reconcile.status import Patcher

Key = tuple[str, str]  # (namespace, name)
_UNKNOWN = "\0unknown"  # after a write without an answer: no cached copy matches, the next read is live
LiveRead = Callable[[str, str], Awaitable[dict[str, Any] | None]]


def _key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


class OwnWrites:
    def __init__(self, read_live: LiveRead, *, first_read_live: bool = False) -> None:
        self._read_live = read_live
        self._written: dict[Key, str] = {}
        self._first_read_live = first_read_live
        self._known: set[Key] = set()  # read live or written by us since we started (``first_read_live``)

    def record(self, written: Mapping[str, Any]) -> None:
        """``written`` is the API server's answer to a write of ours."""
        version = _version(written)
        if version:
            self._written[_key(written)] = version
            self._known.add(_key(written))

    def unanswered(self, namespace: str, name: str) -> None:
        """A write of ours to this object raised: it may be stored, at a version we never saw."""
        self._written[(namespace, name)] = _UNKNOWN

    def observed(self, obj: Mapping[str, Any]) -> None:
        """The informer stored ``obj``: when it is our last write, the cache has caught up for good."""
        key = _key(obj)
        expected = self._written.get(key)
        if expected is not None and expected == _version(obj):
            del self._written[key]

    def forget(self, namespace: str, name: str) -> None:
        self._written.pop((namespace, name), None)
        self._known.discard((namespace, name))

    async def fresh(self, cached: dict[str, Any]) -> dict[str, Any] | None:
        """``cached``, or the live object when the cache has not shown our last write yet (None: gone)."""
        key = _key(cached)
        expected = self._written.get(key)
        if expected is None and (not self._first_read_live or key in self._known):
            return cached
        if expected is not None and expected == _version(cached):
            return cached
        live = await self._read_live(*key)
        if live is None:
            self._written.pop(key, None)
            self._known.discard(key)
        else:
            self._written[key] = _version(live)  # includes our writes: the cache is good once it shows this
            self._known.add(key)
        return live

    def patcher(self, client: Patcher) -> RecordingPatcher:
        return RecordingPatcher(client, self)


class RecordingPatcher:
    """A ``status.Patcher`` that records what each patch answered."""

    def __init__(self, client: Patcher, writes: OwnWrites) -> None:
        self._client = client
        self._writes = writes

    async def patch(self, api_version: str, kind: str, name: str, namespace: str | None, body: Any, *,
                    patch_type: PatchType, field_manager: str | None = None,
                    subresource: str | None = None) -> dict[str, Any]:
        try:
            written = await self._client.patch(api_version, kind, name, namespace, body, patch_type=patch_type,
                                               field_manager=field_manager, subresource=subresource)
        except BaseException:
            self._writes.unanswered(namespace or "", name)
            raise
        self._writes.record(written)
        return written
