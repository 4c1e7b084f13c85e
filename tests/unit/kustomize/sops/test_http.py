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


async def test_an_answer_that_echoes_the_request_carries_no_secret_into_an_error() -> None:
    """A token endpoint, STS and the key services behind a proxy that echoes what it got (body and
    Authorization) in its error answer: the error quotes the answer, not the secrets in it."""
    from kustomize_controller.kustomize.sops.errors import SopsKeyError
    from kustomize_controller.kustomize.sops.keys import aws_sts, azkv, gcpkms, oauth
    from kustomize_controller.kustomize.sops.keys.credentials import AccessToken, Credentials, KeyServiceContext
    from kustomize_controller.kustomize.sops.metadata import MasterKey
    from tests.loopback import serve

    async def echo(request: web.Request) -> web.Response:
        text = f"{await request.text()} auth={request.headers.get('Authorization', '')}"
        if request.path.startswith("/keys") and "Authorization" not in request.headers:
            return web.Response(status=401, headers={"WWW-Authenticate": f'Bearer resource="{url}"'})
        if request.path == "/oauth":
            return web.json_response({"error": "invalid_client", "error_description": text}, status=400)
        if "decrypt" in request.path and "keyRings" in request.path:
            return web.json_response({"error": {"status": "PERMISSION_DENIED", "message": text}}, status=403)
        return web.Response(status=400, text=f"<Error><Code>Bad</Code><Message>{text}</Message></Error>")

    app = web.Application()
    app.router.add_post("/{tail:.*}", echo)
    runner, url = await serve(app)
    try:
        shown: list[str] = []
        with pytest.raises(SopsKeyError) as info:
            await oauth.token_request(f"{url}/oauth", {"client_secret": "S3CRET/+=v", "refresh_token": "R3FRESH"},
                                      timeout=10, now=__import__("datetime").datetime.now(),
                                      environ={}, headers={"Authorization": "Basic QkFTSUM="})
        shown.append(str(info.value))
        context = KeyServiceContext(environ={"AWS_ENDPOINT_URL_STS": url})
        with pytest.raises(SopsKeyError) as info:
            await aws_sts.assume_role_with_web_identity(
                "W3BIDENTITY", role_arn="arn:aws:iam::1:role/r", session_name="s", region="eu-west-1", context=context)
        shown.append(str(info.value))

        class Token:
            async def gcp_token(self) -> AccessToken:
                return AccessToken("GCPT0KEN")

            async def azure_token(self, scope: str) -> AccessToken:
                return AccessToken("AZT0KEN")

        creds = Credentials(gcp=Token(), azure=Token())  # type: ignore[arg-type]
        gcp = KeyServiceContext(credentials=creds, environ={"SOPS_GCP_KMS_ENDPOINT": url})
        with pytest.raises(SopsKeyError) as info:
            resource = "projects/p/locations/l/keyRings/r/cryptoKeys/k"
            await gcpkms.decrypt_data_key(MasterKey(kind="gcp_kms", name=resource, enc="eA=="), gcp)
        shown.append(str(info.value))
        with pytest.raises(SopsKeyError) as info:
            await azkv.decrypt_data_key(MasterKey(kind="azure_kv", name=url, enc="eA",
                                                  extra={"name": "k", "version": "1"}),
                                        KeyServiceContext(credentials=creds))
        shown.append(str(info.value))
    finally:
        await runner.cleanup()
    assert all("[redacted]" in s for s in shown), shown
    for secret in ("S3CRET", "R3FRESH", "QkFTSUM", "W3BIDENTITY", "GCPT0KEN", "AZT0KEN"):
        assert not any(secret in s for s in shown), (secret, shown)
