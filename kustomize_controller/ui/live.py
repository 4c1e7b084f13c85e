"""The UI's live state: one informer per resource type, shared by every open page, and the hub that batches
what changed for the pages.

Contract:
- ``LiveCache`` runs, with the user's client, one informer each for Kustomizations, the core Events about
  Kustomizations (field selector ``involvedObject.kind=Kustomization``, reduced to what the timeline shows),
  each source kind the server serves (reduced to its artifact, conditions and URL) and, when configured, the
  fleet windows' ConfigMap (field selector on its name). However many pages are open, the API server sees
  these watches and nothing else, except the reads a page asks for (``reads.py``).
- Every change marks the Kustomizations it concerns dirty: the object itself, the one an Event is about,
  every Kustomization using a changed source (an index on ``spec.sourceRef``), all of them when the fleet
  windows change.
- ``Hub.run`` waits for something dirty, then ``batch`` seconds (250 ms) more so that a burst lands in one
  message, renders once (``Renderer``) and hands the same message to every subscriber of the topic: ``fleet``
  (every row that changed, the counts) and ``ks:<namespace>/<name>`` (one Kustomization's live sections).
  Each flush has a version; a subscriber that joins with an older version than the hub's (a page rendered
  before the last flush, a reconnect) first gets a full snapshot, so no change is ever lost between a page's
  render and its stream.
- A subscriber's queue is bounded: one that does not keep up (a stalled tab) is dropped, its stream ends and
  the browser's EventSource reconnects with the last version it saw. Memory does not grow with updates.
- Not promised: every intermediate state (a burst is folded into its last state, as the informer folds).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kustomize_controller.api.kustomization import API_VERSION as KS_API_VERSION
from kustomize_controller.api.kustomization import KIND as KS_KIND
from kustomize_controller.api.source import SOURCE_API_VERSION, SourceKind
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.discovery import NoKindMatchError
from kustomize_controller.kube.errors import KubeError
from kustomize_controller.runtime.clock import Clock
from kustomize_controller.runtime.informer import DeletedFinalStateUnknown, FuncHandler, Informer, final_object
from kustomize_controller.runtime.store import Obj, object_key
from kustomize_controller.ui.model import source_ref

BATCH_SECONDS = 0.25
QUEUE_LIMIT = 32
EVENTS_INDEX = "involvedObject"
SOURCE_INDEX = "sourceRef"
FLEET_TOPIC = "fleet"


def detail_topic(key: str) -> str:
    return f"ks:{key}"


def _event_fields(obj: Obj) -> Obj:
    """What the events timeline shows of an Event (the cache keeps nothing else)."""
    meta = obj.get("metadata") or {}
    involved = obj.get("involvedObject") or {}
    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion", "creationTimestamp") if k in meta},
        "involvedObject": {k: involved[k] for k in ("kind", "namespace", "name") if k in involved},
        **{k: obj[k] for k in ("type", "reason", "message", "count", "firstTimestamp", "lastTimestamp", "eventTime")
           if k in obj},
    }


def _source_fields(obj: Obj) -> Obj:
    """What the Kustomization page shows of a source: its URL, artifact and conditions."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    return {
        "kind": obj.get("kind"),
        "metadata": {k: v for k, v in (obj.get("metadata") or {}).items()
                     if k in ("name", "namespace", "resourceVersion", "generation")},
        "spec": {k: spec[k] for k in ("url", "interval", "suspend") if k in spec},
        "status": {k: status[k] for k in ("artifact", "conditions", "observedGeneration") if k in status},
    }


def _involved_key(event: Mapping[str, Any]) -> list[str]:
    involved = event.get("involvedObject") or {}
    return [f"{involved.get('namespace') or ''}/{involved.get('name') or ''}"]


def _source_key(ks: Mapping[str, Any]) -> list[str]:
    kind, namespace, name = source_ref(ks)
    return [f"{kind}/{namespace}/{name}"]


class Renderer(Protocol):
    """Turns the cache into what a topic's pages receive (``server.py`` renders with the templates)."""

    def fleet(self, keys: Iterable[str] | None) -> dict[str, Any]:
        """Rows of ``keys`` (None: every row, a snapshot) and the counts."""
        ...

    def detail(self, key: str) -> dict[str, Any]:
        """The live sections of one Kustomization's page."""
        ...


@dataclass(eq=False)
class Subscription:
    topic: str
    queue: asyncio.Queue[bytes | None] = field(default_factory=lambda: asyncio.Queue(QUEUE_LIMIT))
    dropped: bool = False

    async def next(self) -> bytes | None:
        """The next message; None when the subscription was dropped or the hub stopped."""
        if self.dropped and self.queue.empty():
            return None
        return await self.queue.get()


class Hub:
    """Batches changes and fans them out to subscribers (module contract)."""

    def __init__(self, *, clock: Clock, batch: float = BATCH_SECONDS) -> None:
        self._clock = clock
        self._batch = batch
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self._subscribers: dict[str, set[Subscription]] = {}
        self.version = 0
        self.renderer: Renderer | None = None
        self.flushes = 0  # diagnostics: messages built (the bench reads it)
        self.marked = 0  # diagnostics: changes seen

    def mark(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._dirty.add(key)
            self.marked += 1
        if self._dirty:
            self._wake.set()

    def subscribe(self, topic: str, *, since: int) -> Subscription:
        """A subscription to ``topic``; a snapshot first when ``since`` is older than the hub's version."""
        sub = Subscription(topic)
        self._subscribers.setdefault(topic, set()).add(sub)
        if since != self.version and self.renderer is not None:
            self._offer(sub, self._render(topic, None))
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        subs = self._subscribers.get(sub.topic)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subscribers[sub.topic]

    def subscribers(self) -> int:
        return sum(len(s) for s in self._subscribers.values())

    def _render(self, topic: str, keys: Iterable[str] | None) -> bytes:
        """One Server-Sent Events frame, serialized once for every subscriber of the topic."""
        assert self.renderer is not None
        body = (self.renderer.fleet(keys) if topic == FLEET_TOPIC
                else self.renderer.detail(topic.removeprefix("ks:")))
        return b"data: " + json.dumps({"version": self.version, "full": keys is None, **body}).encode() + b"\n\n"

    def _offer(self, sub: Subscription, message: bytes) -> None:
        if sub.dropped:
            return
        try:
            sub.queue.put_nowait(message)
        except asyncio.QueueFull:  # a tab that does not read: drop it, it reconnects and gets a snapshot
            sub.dropped = True
            self.unsubscribe(sub)

    def flush(self) -> None:
        """Render what is dirty once per topic and offer it to every subscriber."""
        dirty, self._dirty = self._dirty, set()
        self._wake.clear()
        if not dirty:
            return
        self.version += 1
        self.flushes += 1
        if self.renderer is None:
            return
        if self._subscribers.get(FLEET_TOPIC):
            message = self._render(FLEET_TOPIC, sorted(dirty))
            for sub in list(self._subscribers[FLEET_TOPIC]):
                self._offer(sub, message)
        for key in dirty:
            subs = self._subscribers.get(detail_topic(key))
            if subs:
                message = self._render(detail_topic(key), [key])
                for sub in list(subs):
                    self._offer(sub, message)

    async def run(self) -> None:
        """Flush ``batch`` seconds after the first change of each burst, until cancelled."""
        try:
            while True:
                await self._wake.wait()
                await self._clock.sleep(self._batch)
                self.flush()
        finally:
            for subs in list(self._subscribers.values()):
                for sub in list(subs):
                    sub.dropped = True
                    with contextlib.suppress(asyncio.QueueFull):
                        sub.queue.put_nowait(None)
            self._subscribers.clear()


class LiveCache:
    """The informers every page shares and the hub they feed (module contract)."""

    def __init__(self, *, client: KubeClient, clock: Clock, namespace: str | None = None,
                 fleet_windows: tuple[str, str] | None = None, batch: float = BATCH_SECONDS) -> None:
        self._client = client
        self._clock = clock
        self.namespace = namespace
        self.fleet_windows_ref = fleet_windows
        self.hub = Hub(clock=clock, batch=batch)
        self.kustomizations = Informer(client=client, api_version=KS_API_VERSION, kind=KS_KIND, clock=clock,
                                       namespace=namespace)
        self.kustomizations.add_indexer(SOURCE_INDEX, _source_key)
        self.events = Informer(client=client, api_version="v1", kind="Event", clock=clock, namespace=namespace,
                               field_selector=f"involvedObject.kind={KS_KIND}", transform=_event_fields)
        self.events.add_indexer(EVENTS_INDEX, _involved_key)
        self.sources: dict[str, Informer] = {}
        self.fleet_configmap: Informer | None = None
        if fleet_windows is not None:
            self.fleet_configmap = Informer(client=client, api_version="v1", kind="ConfigMap", clock=clock,
                                            namespace=fleet_windows[0],
                                            field_selector=f"metadata.name={fleet_windows[1]}")
        self._wire()

    def _wire(self) -> None:
        def ks_changed(obj: Obj | DeletedFinalStateUnknown, *_: Any) -> None:
            self.hub.mark([object_key(final_object(obj))])

        self.kustomizations.add_handler(FuncHandler(add=ks_changed, update=lambda _, new: ks_changed(new),
                                                    delete=ks_changed))

        def event_changed(obj: Obj | DeletedFinalStateUnknown, *_: Any) -> None:
            self.hub.mark(_involved_key(final_object(obj)))

        self.events.add_handler(FuncHandler(add=event_changed, update=lambda _, new: event_changed(new),
                                            delete=event_changed))
        if self.fleet_configmap is not None:
            def windows_changed(*_: Any) -> None:
                self.hub.mark(object_key(ks) for ks in self.kustomizations.list())

            self.fleet_configmap.add_handler(FuncHandler(add=windows_changed, update=windows_changed,
                                                         delete=windows_changed))

    def _source_handler(self, kind: str) -> FuncHandler:
        def changed(obj: Obj | DeletedFinalStateUnknown, *_: Any) -> None:
            src = final_object(obj)
            meta = src.get("metadata") or {}
            self.hub.mark(self.kustomizations.store.index_keys(
                SOURCE_INDEX, f"{kind}/{meta.get('namespace')}/{meta.get('name')}"))

        return FuncHandler(add=changed, update=lambda _, new: changed(new), delete=changed)

    async def _served_sources(self) -> list[str]:
        served = []
        for kind in SourceKind:
            try:
                await self._client.mapper.resolve(SOURCE_API_VERSION, kind.value)
            except (NoKindMatchError, KubeError):
                continue  # not installed (or discovery failing): the page says the source is unknown
            served.append(kind.value)
        return served

    def informers(self) -> list[Informer]:
        return [self.kustomizations, self.events, *self.sources.values(),
                *([self.fleet_configmap] if self.fleet_configmap is not None else [])]

    def source(self, kind: str, namespace: str, name: str) -> Obj | None:
        informer = self.sources.get(kind)
        return informer.get(f"{namespace}/{name}") if informer is not None else None

    def fleet_configmap_object(self) -> Obj | None:
        if self.fleet_configmap is None or self.fleet_windows_ref is None:
            return None
        return self.fleet_configmap.get(f"{self.fleet_windows_ref[0]}/{self.fleet_windows_ref[1]}")

    def events_of(self, key: str) -> list[Obj]:
        return self.events.store.by_index(EVENTS_INDEX, key)

    def synced(self) -> bool:
        return self.kustomizations.has_synced()

    def errors(self) -> list[str]:
        """What keeps an informer from its first list (forbidden, unreachable): shown on every page."""
        return [f"{informer.kind}: {informer.stats.last_error}" for informer in self.informers()
                if not informer.has_synced() and informer.stats.last_error]

    async def run(self, *, started: Callable[[], None] | None = None) -> None:
        """Run every informer and the hub until cancelled."""
        for kind in await self._served_sources():
            informer = Informer(client=self._client, api_version=SOURCE_API_VERSION, kind=kind, clock=self._clock,
                                namespace=self.namespace, transform=_source_fields)
            informer.add_handler(self._source_handler(kind))
            self.sources[kind] = informer
        async with asyncio.TaskGroup() as tasks:
            for informer in self.informers():
                tasks.create_task(informer.run())
            tasks.create_task(self.hub.run())
            if started is not None:
                started()
