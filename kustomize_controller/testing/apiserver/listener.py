"""``Listener``: the embedded server's listening socket, which remembers every connection it accepts.

aiohttp tracks a connection only once its handler is connected, and over TLS that is after the handshake:
a connection accepted but still in its handshake is known to asyncio alone (Python 3.11's ``Server`` keeps
a count, not the transports). Going down or stopping must cut those too, or they finish their handshake
against a server that is down, or outlive the event loop unclosed. So the listener records each accepted
socket, and ``cut()`` shuts every one still open down: its transport reads EOF and closes itself (a handshake
fails, a request is cut), the peer sees the connection end. Shutting down rather than closing leaves the
file descriptor to its transport, which closes it.
"""

from __future__ import annotations

import asyncio
import socket
import weakref

_CLOSE_ROUNDS = 50  # event loop rounds to let the transports of cut connections close (a few suffice)


class Listener(socket.socket):
    """A bound (not yet listening) TCP socket for ``web.SockSite``; asyncio accepts through ``accept()``."""

    _accepted: weakref.WeakSet[socket.socket]

    @classmethod
    def bind_to(cls, host: str, port: int) -> Listener:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
        listener = cls(family, kind, proto)
        listener._accepted = weakref.WeakSet()
        try:
            # as asyncio's create_server: the port binds again at once after a restart
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            listener.bind(address)
        except BaseException:
            listener.close()
            raise
        return listener

    def accept(self) -> tuple[socket.socket, object]:
        conn, address = super().accept()
        self._accepted.add(conn)
        return conn, address

    def open_connections(self) -> list[socket.socket]:
        return [conn for conn in self._accepted if conn.fileno() != -1]

    def cut(self) -> int:
        """Shut down every accepted connection still open; returns how many."""
        cut = 0
        for conn in self.open_connections():
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:  # the peer is already gone: its transport is closing
                continue
            cut += 1
        return cut

    async def wait_closed(self) -> None:
        """Let the transports of cut connections see their end and close their sockets (bounded)."""
        for _ in range(_CLOSE_ROUNDS):
            if not self.open_connections():
                return
            await asyncio.sleep(0)
