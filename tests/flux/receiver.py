"""An HTTP sink on loopback that records what is POSTed to it: the target of a notification-controller
``generic`` Provider, or a kustomize-controller's ``--events-addr`` itself.

    async with EventReceiver() as sink:
        sink.url                                        # http://127.0.0.1:PORT/
        event = await sink.wait_for(lambda e: e.body["reason"] == "ReconciliationSucceeded", within=60)
        event.headers["Gotk-Component"], event.body["metadata"]

Every request is answered ``status`` (202 by default, as notification-controller answers events);
``received`` keeps them in arrival order. Bodies that are not JSON are kept with ``body = None``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .served import LoopbackServer


@dataclass(frozen=True)
class ReceivedRequest:
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any


@dataclass
class EventReceiver(LoopbackServer):
    """Records every request (module contract)."""

    status: int = 202
    received: list[ReceivedRequest] = field(default_factory=list)
    _arrived: asyncio.Condition | None = None

    @property
    def url(self) -> str:
        return f"{self.base_url}/"

    def app(self) -> web.Application:
        self._arrived = asyncio.Condition()
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._handle)
        return app

    def events(self, predicate: Callable[[ReceivedRequest], bool] = lambda _: True) -> list[ReceivedRequest]:
        return [r for r in self.received if predicate(r)]

    async def wait_for(self, predicate: Callable[[ReceivedRequest], bool], *, within: float,
                       what: str = "an event") -> ReceivedRequest:
        """The first request (already received or arriving within ``within`` s) that ``predicate``
        accepts; ``TimeoutError`` naming ``what`` and what did arrive otherwise."""
        assert self._arrived is not None, "the receiver is not started"

        def found() -> ReceivedRequest | None:
            return next((r for r in self.received if _accepts(predicate, r)), None)

        async with self._arrived:
            try:
                await asyncio.wait_for(self._arrived.wait_for(lambda: found() is not None), within)
            except TimeoutError:
                seen = [r.body for r in self.received]
                raise TimeoutError(f"{what}: none within {within}s; received {seen!r}") from None
        result = found()
        assert result is not None
        return result

    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = None
        self.received.append(ReceivedRequest(method=request.method, path=request.path,
                                             headers=dict(request.headers), raw=raw, body=body))
        assert self._arrived is not None
        async with self._arrived:
            self._arrived.notify_all()
        return web.Response(status=self.status)


def _accepts(predicate: Callable[[ReceivedRequest], bool], request: ReceivedRequest) -> bool:
    try:
        return bool(predicate(request))
    except (KeyError, TypeError, AttributeError):
        return False
