"""``python -m bench.apiserver_main ARGS``: the embedded API server, with its watch pump fixed when needed.

The pump in ``kustomize_controller/testing/apiserver/watch.py`` waits for the next event with
``asyncio.wait_for(queue.get(), timeout=max(0.0, wake - now))``. Once a bookmark is due while events
are queued, the timeout is 0, and ``wait_for`` with a zero timeout raises ``TimeoutError`` even when
the queue holds an item (CPython cancels the not-yet-started ``get()``); the bookmark branch requires
an empty queue, so the pump spins at 100 % CPU and delivers nothing until the watch's deadline. Under
load (hundreds of Kustomizations) this stalls informers for minutes. Reported to the owner of
``testing/apiserver``; until it is fixed there, the benchmark runs the server with the pump below,
which takes a queued event without waiting. Once the original no longer has the zero-timeout wait,
this launcher changes nothing.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import time
from typing import Any

from aiohttp import web

from kustomize_controller.testing.apiserver import watch
from kustomize_controller.testing.apiserver.__main__ import main as apiserver_main


async def _pump(response: web.StreamResponse, storage: Any, watcher: Any, req: Any) -> None:
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
        if req.bookmarks and not final_sent:
            wake = min(wake, next_bookmark)
        try:
            event = watcher.queue.get_nowait()
        except asyncio.QueueEmpty:
            try:
                event = await asyncio.wait_for(watcher.queue.get(), timeout=max(0.001, wake - now))
            except TimeoutError:
                if req.bookmarks and watcher.queue.empty() and time.monotonic() >= next_bookmark and not final_sent:
                    await response.write(watch._bookmark(req.rt, storage.resource_version))
                    if next_bookmark >= final_bookmark_at:
                        final_sent = True
                    next_bookmark = min(time.monotonic() + req.bookmark_interval, final_bookmark_at)
                continue
        if event is None:
            return
        translated = watch._translate(req, event)
        if translated is not None:
            await response.write(watch._encoded(event, translated[0], translated[1], req.rt))


def needs_fix() -> bool:
    return "timeout=max(0.0, wake - now)" in inspect.getsource(watch._pump)


def main() -> int:
    if needs_fix():
        setattr(watch, "_pump", _pump)  # noqa: B010 - the module attribute serve_watch calls
    return apiserver_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
