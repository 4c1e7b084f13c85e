"""Watch streams: newline-delimited JSON events over a chunked HTTP response.

Contract:
- ``resourceVersion`` unset or ``"0"``: one synthetic ADDED per current matching object, then live events.
  ``resourceVersion=N``: every event after N (replayed from the bounded history), then live events; when N
  is older than the history keeps, one ERROR event with a 410 ``Expired`` Status, then the stream ends.
- ``sendInitialEvents=true`` (with ``resourceVersionMatch=NotOlderThan``): synthetic ADDED events, then a
  BOOKMARK annotated ``k8s.io/initial-events-end: "true"``.
- With selectors, an object that stops matching arrives as DELETED and one that starts matching as ADDED.
- ``allowWatchBookmarks=true``: a BOOKMARK every ``bookmark_interval`` seconds and once shortly
  (``min(2 s, timeout/2)``) before ``timeoutSeconds`` ends — each only when the resource has an event newer
  than the watch's start (delivered to it or not: other namespaces and filtered-out objects count), and then
  carrying the newest event's resourceVersion: kube-apiserver v1.36.3's watch cache bookmarks what it has
  seen of the resource, and a watch on a resource nobody wrote since it began gets no bookmark (checked with
  ``make test-real``). A bookmark is only sent when no event is pending, so
  resuming from it loses nothing.
- A client with faults armed (``clientfaults.py``) may have events held, dropped or its stream cut.
- The stream ends cleanly at ``timeoutSeconds`` (default: the server's ``watch_timeout``), when the
  watcher is closed (fault injection, slow consumer, shutdown) or when the client goes away.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from .clientfaults import CLOSE, EXPIRE, ClientFaults, WatchTap
from .errors import ApiStatusError, gone_expired
from .kinds import ResourceType
from .objects import with_version
from .reads import snapshot
from .selectors import FieldSelector, LabelSelector
from .storage import Event, Storage


@dataclass(frozen=True)
class WatchRequest:
    rt: ResourceType
    namespace: str | None
    resource_version: str
    timeout: float
    bookmarks: bool
    labels: LabelSelector
    fields: FieldSelector
    send_initial_events: bool
    bookmark_interval: float
    # a custom resource read through a non-storage version: each object is converted (conversion.py)
    convert: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None
    user: str = ""


def _line(type_: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": type_, "object": obj}, separators=(",", ":")).encode() + b"\n"


def _matches(req: WatchRequest, obj: dict[str, Any] | None) -> bool:
    if obj is None:
        return False
    return req.labels.matches(obj.get("metadata", {}).get("labels")) and req.fields.matches(obj)


def _translate(req: WatchRequest, event: Event) -> tuple[str, dict[str, Any]] | None:
    """The event as this watcher sees it through its selectors (None: not for this watcher)."""
    if req.labels.empty and req.fields.empty:
        return event.type, event.obj
    now_matches = _matches(req, event.obj)
    if event.type == "ADDED":
        return ("ADDED", event.obj) if now_matches else None
    if event.type == "DELETED":
        return ("DELETED", event.obj) if now_matches or _matches(req, event.old) else None
    was_matching = _matches(req, event.old)
    if now_matches:
        return ("MODIFIED" if was_matching else "ADDED"), event.obj
    return ("DELETED", event.obj) if was_matching else None


def _bookmark(rt: ResourceType, rv: int, initial_end: bool = False) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": str(rv), "creationTimestamp": None}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return _line("BOOKMARK", {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta})


class _Cut(Exception):
    """A client fault ended the stream (clientfaults.py)."""


async def serve_watch(request: web.Request, storage: Storage, req: WatchRequest,
                      client_faults: ClientFaults | None = None) -> web.StreamResponse:
    rt = req.rt
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json",
                                                       "Cache-Control": "no-cache, private"})
    response.enable_chunked_encoding()
    await response.prepare(request)

    def accepts(event: Event) -> bool:
        return _translate(req, event) is not None

    since: int | None
    synthetic = req.resource_version in ("", "0") or req.send_initial_events
    if synthetic:
        since = None
    else:
        try:
            since = int(req.resource_version)
        except ValueError:
            await response.write(_line("ERROR", gone_expired(
                f"invalid resource version: {req.resource_version!r}").body()))
            return response
    # a faulted client's lagging watch cache (clientfaults.py) starts a resourceVersion=0 watch in the past
    stale = None
    if synthetic and not req.send_initial_events and client_faults is not None:
        stale = client_faults.stale_resource_version(req.user, rt.plural, storage.resource_version,
                                                     storage.oldest_watchable)
    registered = storage.watch(rt.storage_key, req.namespace, since if stale is None else stale, accepts)
    if registered is None:
        await response.write(_line("ERROR", gone_expired(
            f"too old resource version: {since} ({storage.oldest_watchable})").body()))
        await response.write_eof()
        return response
    watcher, backlog = registered
    tap = None if client_faults is None else client_faults.tap(req.user, rt.plural, lambda: storage.resource_version,
                                                               watcher.close)
    try:
        if synthetic:
            current = (storage.iterate(rt.storage_key, req.namespace) if stale is None else
                       snapshot(storage, rt, req.namespace, None, stale))
            initial = [obj for obj in current if _matches(req, obj)]
            initial_rv = storage.resource_version
            for obj in initial:
                await response.write(await _converted_line(req, "ADDED", obj) if req.convert else
                                     _line("ADDED", with_version(obj, rt)))
            if req.send_initial_events:
                await response.write(_bookmark(rt, initial_rv, initial_end=True))
        began = storage.resource_version if synthetic else (since or 0)
        for event in backlog:
            translated = _translate(req, event)
            if translated is not None:
                await _tapped(response, tap, event)
                await response.write(await _converted_line(req, *translated) if req.convert else
                                     _line(translated[0], with_version(translated[1], rt)))
        await _pump(response, storage, watcher, req, tap, began=began)
        await response.write_eof()
    except _Cut:
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
    except ConnectionResetError:
        pass  # the client went away: nothing to tell it
    finally:
        watcher.close()
        storage.unwatch(watcher)
        if client_faults is not None and tap is not None:
            client_faults.untap(req.user, watcher.close)
    return response


async def _tapped(response: web.StreamResponse, tap: WatchTap | None, event: Event) -> None:
    """Ask a faulted client's tap about ``event``: held for a while, or the stream ends here (_Cut)."""
    if tap is None:
        return
    action = await tap.before(event.rv)
    if action == EXPIRE:
        await response.write(_line("ERROR", gone_expired(f"too old resource version: {event.rv - 1}").body()))
        raise _Cut
    if action == CLOSE:
        raise _Cut


_NOTHING: Any = object()


async def _pump(response: web.StreamResponse, storage: Storage, watcher: Any, req: WatchRequest,
                tap: WatchTap | None, *, began: int) -> None:
    start = time.monotonic()
    deadline = start + req.timeout
    final_bookmark_at = deadline - min(2.0, req.timeout / 2)
    next_bookmark = min(start + req.bookmark_interval, final_bookmark_at)
    final_sent = False
    while True:
        now = time.monotonic()
        if now >= deadline:
            return
        wake = deadline
        bookmarks = req.bookmarks and (tap is None or tap.bookmarks)
        if bookmarks and not final_sent:
            wake = min(wake, next_bookmark)
        try:
            # A queued event is taken without waiting: ``wait_for`` with a zero timeout (a bookmark
            # already due) raises even when the queue holds an item, and the pump would spin.
            event = watcher.queue.get_nowait()
        except asyncio.QueueEmpty:
            event = _NOTHING
        if event is _NOTHING:
            try:
                event = await asyncio.wait_for(watcher.queue.get(), timeout=max(0.001, wake - now))
            except TimeoutError:
                event = _NOTHING
        if event is _NOTHING:
            if bookmarks and watcher.queue.empty() and time.monotonic() >= next_bookmark and not final_sent:
                progress = storage.latest_rv(req.rt.storage_key)
                if progress > began:  # nothing new of the resource: a real watch cache sends no bookmark
                    await response.write(_bookmark(req.rt, progress))
                if next_bookmark >= final_bookmark_at:
                    final_sent = True
                next_bookmark = min(time.monotonic() + req.bookmark_interval, final_bookmark_at)
            continue
        if event is None:
            return
        translated = _translate(req, event)
        if translated is not None:
            await _tapped(response, tap, event)
            await response.write(await _converted_line(req, *translated) if req.convert else
                                 _encoded(event, translated[0], translated[1], req.rt))


async def _converted_line(req: WatchRequest, type_: str, obj: dict[str, Any]) -> bytes:
    """The event converted to the watched version; a failed conversion is an ERROR event in its place
    (the watch goes on with the next event)."""
    assert req.convert is not None
    try:
        return _line(type_, await req.convert(obj))
    except ApiStatusError as err:
        return _line("ERROR", err.body())


def _encoded(event: Event, type_: str, obj: dict[str, Any], rt: ResourceType) -> bytes:
    """The event's line, serialised once for every watcher that sees it the same way (fan-out)."""
    if obj is not event.obj:
        return _line(type_, with_version(obj, rt))
    key = (type_, rt.api_version)
    line = event.lines.get(key)
    if line is None:
        line = event.lines[key] = _line(type_, with_version(obj, rt))
    return line
