"""Going down (and stopping) cuts every server-side connection, including one still in its TLS handshake:
aiohttp only learns of a TLS connection once its handshake is done, so such a connection used to outlive
``go_down()``/``stop()``; it then finished its handshake against a server that was down, or was left
unclosed when the event loop ended (a ResourceWarning for an unclosed transport on the server's port)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import pytest

from kustomize_controller.testing.apiserver import ApiServer

from .helpers import call, cm_path

pytestmark = pytest.mark.integration


async def _half_open(server: ApiServer) -> socket.socket:
    """A raw TCP connection the server has accepted, with no ClientHello sent: its TLS handshake is open."""
    address = urlsplit(server.url)
    assert address.hostname is not None and address.port is not None
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setblocking(False)
    await asyncio.get_running_loop().sock_connect(raw, (address.hostname, address.port))
    # a full request on a second connection: the server accepts connections in the order they arrive, so
    # once this one is answered the raw connection above has been accepted too
    async with server.session() as http:
        status, _ = await call(http, "GET", cm_path("default"))
        assert status == 200
    return raw


async def _server_closes(raw: socket.socket) -> None:
    # EOF, or a reset, once the server's side is closed; the timeout only bounds a failure
    with raw, contextlib.suppress(ConnectionResetError):
        assert await asyncio.wait_for(asyncio.get_running_loop().sock_recv(raw, 1), 10) == b""


@pytest.mark.parametrize("leave", ["go_down", "stop"])
async def test_a_connection_mid_tls_handshake_is_cut(leave: str) -> None:
    async with ApiServer() as server:
        raw = await _half_open(server)
        leaving: Callable[[], Awaitable[object]] = getattr(server, leave)
        await leaving()
        await _server_closes(raw)
        if leave == "go_down":
            await server.come_back()
            async with server.session() as http:
                status, _ = await call(http, "GET", cm_path("default"))
            assert status == 200


async def test_an_idle_keep_alive_connection_is_cut_on_stop() -> None:
    async with ApiServer(tls=False) as server:
        address = urlsplit(server.url)
        assert address.hostname is not None and address.port is not None
        reader, writer = await asyncio.open_connection(address.hostname, address.port)
        writer.write(f"GET /api HTTP/1.1\r\nHost: {address.netloc}\r\nAuthorization: Bearer {server.token}\r\n\r\n"
                     .encode())
        head = (await reader.readuntil(b"\r\n\r\n")).decode().lower()
        assert head.startswith("http/1.1 200") and "connection: close" not in head
        length = next(int(line.split(":")[1]) for line in head.splitlines() if line.startswith("content-length:"))
        await reader.readexactly(length)  # the whole answer: the connection now idles, kept alive
        await server.stop()
        try:
            assert await asyncio.wait_for(reader.read(), 10) == b""  # the timeout only bounds a failure
        finally:
            writer.close()


async def test_a_connection_accepted_before_going_down_is_not_served_while_down() -> None:
    """Finishing the handshake after ``go_down()`` fails: the connection is not served by the server that
    went down (it used to be, and then outlived ``stop()`` unclosed)."""
    async with ApiServer() as server:
        raw = await _half_open(server)
        await server.go_down()
        with pytest.raises((ConnectionError, ssl.SSLError)):  # the timeout only bounds a failure
            _, tls = await asyncio.wait_for(asyncio.open_connection(
                sock=raw, ssl=server.ssl_context(), server_hostname=urlsplit(server.url).hostname), 10)
            tls.close()
        raw.close()
