"""Kubernetes ``core/v1`` Event recorder (client-go ``record.EventRecorder``, trimmed).

Contract:
- ``await record(involved, event_type=..., reason=..., message=..., annotations=...)`` never blocks on
  the API and never raises: it puts the event on a bounded queue and returns. ``run()`` — a
  long-lived task the manager owns — sends them one by one. When the queue is full the oldest
  pending event is dropped (and logged): events are best effort, a reconcile must not wait for them.
- ``involved`` is either the object itself (``apiVersion``/``kind``/``metadata``) or an
  ObjectReference-shaped mapping (``kind``, ``namespace``, ``name``, ``uid``, ``apiVersion``,
  ``resourceVersion``).
- Aggregation: an event identical to one already sent (same involved object, type, reason, message
  and source) bumps ``count`` and ``lastTimestamp`` of the existing Event with a merge patch instead of
  creating a new object; if that Event is gone, a new one is created. The cache of sent events is
  an LRU of ``cache_size`` entries, each keyed by a 16-byte digest of the aggregation key (messages
  such as "Reconciliation finished in 52ms" never repeat, so the cache is mostly entries that are never
  hit again: they should cost little).
- Events carry ``source.component`` and ``reportingComponent`` (``reporting_controller``, e.g.
  ``kustomize-controller``), ``reportingInstance`` (``reporting_instance``: empty for the controller, as
  upstream's client-go recorder leaves it) and the annotations given.
  Events go to the involved object's namespace (``default`` for cluster-scoped objects).
- An API error while sending is logged and the event dropped; ``send`` (the direct path used by
  ``run``) swallows every error but cancellation.

Not promised: client-go's similar-event aggregation ("combined from similar events") and spam filter.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import NotFoundError
from kustomize_controller.runtime.clock import Clock
from kustomize_controller.runtime.logs import get_logger

EVENT_TYPE_NORMAL = "Normal"
EVENT_TYPE_WARNING = "Warning"


def object_reference(involved: Mapping[str, Any]) -> dict[str, str]:
    """An ObjectReference for an object or an already-built reference."""
    if "metadata" in involved:
        meta = involved.get("metadata") or {}
        ref = {
            "apiVersion": involved.get("apiVersion", ""),
            "kind": involved.get("kind", ""),
            "namespace": meta.get("namespace", ""),
            "name": meta.get("name", ""),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        }
    else:
        keys = ("apiVersion", "kind", "namespace", "name", "uid", "resourceVersion")
        ref = {k: involved.get(k, "") for k in keys}
    return {k: str(v) for k, v in ref.items() if v}


@dataclass(frozen=True)
class PendingEvent:
    ref: dict[str, str]
    event_type: str
    reason: str
    message: str
    annotations: dict[str, str] = field(default_factory=dict)

    def aggregation_key(self) -> tuple[str, ...]:
        r = self.ref
        return (
            r.get("kind", ""),
            r.get("namespace", ""),
            r.get("name", ""),
            r.get("uid", ""),
            self.event_type,
            self.reason,
            self.message,
        )


@dataclass(slots=True)
class _Sent:
    name: str
    namespace: str
    count: int
    first: str


def _format_time(clock: Clock) -> str:
    return clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    def __init__(
        self,
        *,
        client: KubeClient,
        clock: Clock,
        reporting_controller: str = "kustomize-controller",
        reporting_instance: str = "",
        queue_size: int = 1000,
        cache_size: int = 4096,
    ) -> None:
        self._client = client
        self._clock = clock
        self.reporting_controller = reporting_controller
        self.reporting_instance = reporting_instance
        self._queue: collections.deque[PendingEvent] = collections.deque(maxlen=queue_size)
        self._wakeup = asyncio.Event()
        self._sent: collections.OrderedDict[bytes, _Sent] = collections.OrderedDict()
        self._cache_size = cache_size
        self._seq = 0
        self.dropped = 0
        self._log = get_logger("events")

    async def record(
        self,
        involved: Mapping[str, Any],
        *,
        event_type: str,
        reason: str,
        message: str,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        self.event(involved, event_type=event_type, reason=reason, message=message, annotations=annotations)

    def event(
        self,
        involved: Mapping[str, Any],
        *,
        event_type: str,
        reason: str,
        message: str,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """Queue an event (synchronous, never raises)."""
        try:
            pending = PendingEvent(
                ref=object_reference(involved),
                event_type=event_type,
                reason=reason,
                message=message,
                annotations=dict(annotations or {}),
            )
        except Exception:  # a malformed reference must not fail the caller
            self._log.exception("dropping malformed event")
            return
        if len(self._queue) == self._queue.maxlen:
            self.dropped += 1
            self._log.warning("event queue full, dropping the oldest event")
        self._queue.append(pending)
        self._wakeup.set()

    @property
    def pending(self) -> int:
        return len(self._queue)

    async def run(self) -> None:
        """Send queued events until cancelled."""
        while True:
            while self._queue:
                await self.send(self._queue.popleft())
            self._wakeup.clear()
            await self._wakeup.wait()

    async def flush(self) -> None:
        """Send everything queued now (tests and shutdown)."""
        while self._queue:
            await self.send(self._queue.popleft())

    async def send(self, ev: PendingEvent) -> None:
        try:
            await self._send(ev)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            ref = ev.ref
            self._log.warning(
                "unable to record event",
                object=f"{ref.get('kind', '')}/{ref.get('namespace', '')}/{ref.get('name', '')}",
                reason=ev.reason,
                error=str(err),
            )

    async def _send(self, ev: PendingEvent) -> None:
        now = _format_time(self._clock)
        key = hashlib.blake2b("\0".join(ev.aggregation_key()).encode(), digest_size=16).digest()
        previous = self._sent.get(key)
        if previous is not None:
            count = previous.count + 1
            patch = {"count": count, "lastTimestamp": now}
            try:
                await self._client.patch("v1", "Event", previous.name, previous.namespace, patch, patch_type="merge")
            except NotFoundError:
                pass  # the Event expired (1 h TTL by default): create a fresh one below
            else:
                previous.count = count
                self._sent.move_to_end(key)
                return
        namespace = ev.ref.get("namespace") or "default"
        name = self._event_name(ev.ref.get("name", "unknown"))
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": ev.ref,
            "type": ev.event_type,
            "reason": ev.reason,
            "message": ev.message,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": self.reporting_controller},
            "reportingComponent": self.reporting_controller,
            "reportingInstance": self.reporting_instance,
        }
        if ev.annotations:
            body["metadata"]["annotations"] = dict(ev.annotations)
        await self._client.create(body)
        self._sent[key] = _Sent(name=name, namespace=namespace, count=1, first=now)
        self._sent.move_to_end(key)
        while len(self._sent) > self._cache_size:
            self._sent.popitem(last=False)

    def _event_name(self, involved_name: str) -> str:
        # client-go: "<name>.<unix nanos in hex>"; a sequence keeps names unique under a fake clock
        self._seq += 1
        nanos = int(self._clock.now().timestamp() * 1e9) + self._seq
        return f"{involved_name}.{nanos:x}"
