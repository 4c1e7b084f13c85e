"""A TCP proxy on loopback that can cut every connection through it at once: the soak's watch cuts.

``TcpProxy(target_port)`` listens on ``127.0.0.1:<port>`` and relays every connection, byte for byte, to
``127.0.0.1:<target_port>`` (TLS passes through untouched: the API server's certificate names
``127.0.0.1``, so a kubeconfig that points at the proxy's port verifies as it would at the server's).
``cut()`` aborts every open connection on both sides with a TCP reset (``SO_LINGER`` 0) and returns how
many it cut: the client sees "connection reset" on its watches and on requests in flight, as after a
load balancer or NAT dropping its connection state, while the API server itself stays up and keeps
serving the next connection. Whether a request cut in flight was stored is up to the server (as in real
life). A connection to a target that refuses (a restarting API server) is closed at once, as a refused
connection would be.

Why a proxy rather than restarting the server: a restart also makes the server unavailable and ends its
watches from the server's side; a cut keeps the server (and its watch cache) as it was and tests the
client's side alone — the informer's re-watch from its last resourceVersion, a write whose answer was
lost. The proxy knows nothing of HTTP (under TLS it cannot tell a watch from a GET), so a cut hits every
open connection, idle keep-alive ones included.

Flow control: a side whose peer's write buffer is full stops being read until it drains, so memory is
bounded per connection. ``stop()`` closes the listener and every connection. Runs on the caller's event
loop: the loop must not be blocked (a blocking call in it stalls every relayed byte).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from dataclasses import dataclass

_LINGER_RESET = struct.pack("ii", 1, 0)
_HIGH_WATER = 256 * 1024


class _Side(asyncio.Protocol):
    """One socket of a relayed pair; writes what it reads into its peer's transport."""

    def __init__(self, pair: _Pair) -> None:
        self.pair = pair
        self.transport: asyncio.Transport | None = None
        self.peer: _Side | None = None
        self.pending: list[bytes] = []  # read before the peer connected

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=_HIGH_WATER)

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is None or peer.transport is None:
            self.pending.append(data)
            if self.transport is not None and sum(map(len, self.pending)) > _HIGH_WATER:
                self.transport.pause_reading()
            return
        peer.transport.write(data)

    def eof_received(self) -> bool:
        # a half-close is passed on; the pair ends when both directions ended (or on a reset)
        peer = self.peer
        if peer is not None and peer.transport is not None and peer.transport.can_write_eof():
            peer.transport.write_eof()
        return True

    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.pair.close()


@dataclass(eq=False)
class _Pair:
    proxy: TcpProxy
    client: _Side | None = None
    upstream: _Side | None = None
    closed: bool = False

    def sides(self) -> list[_Side]:
        return [s for s in (self.client, self.upstream) if s is not None]

    def close(self, *, reset: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        self.proxy._pairs.discard(self)
        for side in self.sides():
            if side.transport is None:
                continue
            if reset:
                sock = side.transport.get_extra_info("socket")
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
                side.transport.abort()
            else:
                side.transport.close()


class TcpProxy:
    """``127.0.0.1:<port>`` → ``target_host:target_port`` (module contract)."""

    def __init__(self, target_port: int, *, target_host: str = "127.0.0.1", host: str = "127.0.0.1",
                 port: int = 0, connect_timeout: float = 10.0) -> None:
        self.target = (target_host, target_port)
        self.host = host
        self.port = port
        self.connect_timeout = connect_timeout
        self.accepted = 0  # connections accepted
        self.refused = 0  # of those, the target refused or did not answer in time
        self.cut_total = 0  # connections cut by cut()
        self._pairs: set[_Pair] = set()
        self._server: asyncio.Server | None = None
        self._connecting: set[asyncio.Task[None]] = set()

    @property
    def open_connections(self) -> int:
        return len(self._pairs)

    async def start(self) -> TcpProxy:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._accept, self.host, self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def _accept(self) -> _Side:
        pair = _Pair(self)
        side = _Side(pair)
        pair.client = side
        self._pairs.add(pair)
        self.accepted += 1
        task = asyncio.get_running_loop().create_task(self._connect(pair, side))
        self._connecting.add(task)
        task.add_done_callback(self._connecting.discard)
        return side

    async def _connect(self, pair: _Pair, client: _Side) -> None:
        loop = asyncio.get_running_loop()
        upstream = _Side(pair)
        try:
            await asyncio.wait_for(loop.create_connection(lambda: upstream, *self.target), self.connect_timeout)
        except (OSError, TimeoutError):
            self.refused += 1
            pair.close(reset=True)
            return
        if pair.closed:  # the client went away (or was cut) while we connected
            if upstream.transport is not None:
                upstream.transport.close()
            return
        pair.upstream = upstream
        client.peer, upstream.peer = upstream, client
        assert upstream.transport is not None
        for chunk in client.pending:
            upstream.transport.write(chunk)
        client.pending.clear()
        if client.transport is not None:
            client.transport.resume_reading()

    def cut(self) -> int:
        """Reset every open connection (both sides); returns how many were open."""
        pairs = list(self._pairs)
        for pair in pairs:
            pair.close(reset=True)
        self.cut_total += len(pairs)
        return len(pairs)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self.cut()
            await self._server.wait_closed()
            self._server = None
        for task in list(self._connecting):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def __aenter__(self) -> TcpProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
