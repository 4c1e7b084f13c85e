"""Test support (and the bench's): an aiohttp application on a free loopback port."""

from __future__ import annotations

from aiohttp import web


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    """Start ``app`` on 127.0.0.1; returns its runner (``await runner.cleanup()`` stops it) and URL."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


def serve_blobs(blobs: dict[str, bytes]) -> web.Application:
    """An application answering ``GET <path>`` with ``blobs[path]``, 404 for any other path (an artifact store)."""

    async def handler(request: web.Request) -> web.Response:
        blob = blobs.get(request.path)
        return web.Response(status=404) if blob is None else web.Response(body=blob)

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    return app
