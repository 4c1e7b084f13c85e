"""The soak's TCP proxy (tests/controlplane/proxy.py) in front of an API server: bytes relayed both ways
(TLS through it untouched), and a cut resets every open connection — a watch included — while the next
connection is served."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import urlsplit

import aiohttp
import pytest

from tests.controlplane.proxy import TcpProxy

pytestmark = pytest.mark.integration


async def test_a_cut_resets_every_open_connection_and_the_next_one_is_served(cluster) -> None:  # type: ignore[no-untyped-def]
    address = urlsplit(cluster.url)
    if address.hostname not in ("127.0.0.1", "localhost") or address.port is None:
        pytest.skip("the proxy listens on 127.0.0.1: the server's certificate must name it")
    path = f"/api/v1/namespaces/{cluster.namespace}/configmaps"
    big = "x" * (384 * 1024)  # more than the proxy's write buffer: relayed with flow control
    async with TcpProxy(address.port) as proxy:
        def session() -> aiohttp.ClientSession:
            return aiohttp.ClientSession(f"https://127.0.0.1:{proxy.port}", headers=cluster.headers(),
                                         connector=aiohttp.TCPConnector(ssl=cluster.ssl_context),
                                         timeout=aiohttp.ClientTimeout(total=60))

        async with session() as http:
            async with http.post(path, json={"metadata": {"name": "big"}, "data": {"k": big}}) as resp:
                assert resp.status == 201, await resp.text()
            async with http.get(f"{path}/big") as resp:
                assert (await resp.json())["data"]["k"] == big
            async with http.get(path, params={"watch": "true", "timeoutSeconds": "60"}) as watch:
                assert watch.status == 200
                first = json.loads(await asyncio.wait_for(watch.content.readline(), 30))
                assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "big")
                assert proxy.open_connections >= 1
                assert proxy.cut() >= 1
                with pytest.raises((aiohttp.ClientError, ConnectionError)):
                    while await asyncio.wait_for(watch.content.readline(), 30):
                        pass
        assert proxy.open_connections == 0
        async with session() as http, http.get(f"{path}/big") as resp:
            assert resp.status == 200
        assert proxy.accepted >= 2 and proxy.refused == 0
