"""An events receiver on loopback: what a kustomize-controller POSTs to ``--events-addr``.

notification-controller's event endpoint, reduced to what a test needs: every ``POST`` (any path) with a
JSON body is recorded with its arrival time (``time.monotonic()``) and answered ``202 Accepted``, as
notification-controller answers an event it took. Nothing is forwarded. One receiver per controller, so
each controller's events stay apart.

    async with EventsReceiver() as receiver:
        ... controller started with --events-addr={receiver.url} ...
        for event in receiver.events: event.body["message"], event.at

Kept in one module, with no dependency on the rest of the harness, so that other Flux harnesses can share it.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class ReceivedEvent:
    at: float  # time.monotonic() at arrival
    path: str
    content_type: str
    body: dict[str, Any]


@dataclass
class EventsReceiver:
    host: str = "127.0.0.1"
    port: int = 0
    events: list[ReceivedEvent] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # bodies that were not a JSON object
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    async def start(self) -> None:
        if not self.port:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((self.host, 0))
                self.port = int(sock.getsockname()[1])
        app = web.Application(client_max_size=4 << 20)
        app.router.add_route("POST", "/{tail:.*}", self._receive)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> EventsReceiver:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    async def _receive(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self.rejected.append(raw[:200].decode(errors="replace"))
            return web.Response(status=400, text="not a JSON object")
        self.events.append(ReceivedEvent(at=time.monotonic(), path=request.path,
                                         content_type=request.headers.get("Content-Type", ""), body=body))
        return web.Response(status=202)

    def for_object(self, namespace: str, name: str | None = None) -> list[ReceivedEvent]:
        """The events about Kustomizations in ``namespace`` (named ``name`` when given), in arrival order."""
        found = []
        for event in self.events:
            involved = event.body.get("involvedObject") or {}
            if involved.get("namespace") == namespace and (name is None or involved.get("name") == name):
                found.append(event)
        return found
