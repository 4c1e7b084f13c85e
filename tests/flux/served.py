"""What the loopback servers here share: ``async with`` around ``start()``/``stop()``, and one aiohttp
application on a free port of 127.0.0.1 (``tests/loopback.serve``)."""

from __future__ import annotations

from types import TracebackType
from typing import Self

from aiohttp import web

from tests.loopback import serve


class LoopbackServer:
    """Subclasses build their application in ``app()``; ``port`` and ``base_url`` once started."""

    _runner: web.AppRunner | None = None
    base_url: str = ""

    def app(self) -> web.Application:
        raise NotImplementedError

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1]) if self.base_url else 0

    async def start(self) -> None:
        self._runner, self.base_url = await serve(self.app())

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()
