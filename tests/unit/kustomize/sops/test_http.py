"""The key services' HTTP exchange: a TLS endpoint with a private CA (``AWS_CA_BUNDLE``), the
size limit, and errors that name the URL without its query."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kustomize_controller.kustomize.sops.keys import http

from .loopback import self_signed


def _tls_files(tmp_path: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = self_signed(key, ip="127.0.0.1")
    cert_path, key_path = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


async def test_private_ca_bundle(tmp_path: Path) -> None:
    cert, key = _tls_files(tmp_path)

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * (2 << 20) if request.path == "/big" else b"ok")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    url = f"https://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    try:
        answer = await http.call("GET", f"{url}/ok", timeout=10, cafile=str(cert))
        assert answer.status == 200 and answer.body == b"ok"
        with pytest.raises(http.TransportError) as info:
            await http.call("GET", f"{url}/ok?X-Amz-Signature=secret", timeout=10)
        assert str(info.value).startswith(f"GET {url}/ok: ") and "secret" not in str(info.value)
        with pytest.raises(http.TransportError, match="larger than 1048576 bytes"):
            await http.call("GET", f"{url}/big", timeout=10, cafile=str(cert))
        with pytest.raises(http.TransportError, match="failed to load the CA bundle"):
            await http.call("GET", f"{url}/ok", timeout=10, cafile=str(tmp_path / "missing.pem"))
    finally:
        await runner.cleanup()
