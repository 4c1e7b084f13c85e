"""A loopback Azure: Entra ID token endpoint (client secret, certificate assertion, federated
token), IMDS managed identity, and a Key Vault holding a real RSA key that does RSA-OAEP-256
``decrypt`` behind the bearer challenge. It checks what the controller sends and records it."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.loopback import serve

from .loopback import Issuer, self_signed

TENANT = "00000000-0000-0000-0000-0000000000aa"
CLIENT_ID = "11111111-2222-3333-4444-555555555555"
CLIENT_SECRET = "AZURE-CLIENT-SECRET-never-leak"
FEDERATED_TOKEN = "federated.jwt.token"
KEY_NAME, KEY_VERSION = "sops", "0123456789abcdef"
OAEP = padding.OAEP(mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA256(), label=None)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def client_certificate() -> tuple[rsa.RSAPrivateKey, x509.Certificate]:
    key = rsa.generate_private_key(65537, 2048)
    return key, self_signed(key)


@dataclass
class FakeAzure:
    url: str = ""
    vault_key: rsa.RSAPrivateKey = field(default_factory=lambda: rsa.generate_private_key(65537, 2048))
    client_cert: tuple[rsa.RSAPrivateKey, x509.Certificate] = field(default_factory=client_certificate)
    issuer: Issuer = field(default_factory=Issuer)
    requests: list[dict[str, Any]] = field(default_factory=list)
    forbidden: bool = False

    @property
    def scope(self) -> str:
        return "https://127.0.0.1/.default"

    def encrypt(self, data_key: bytes) -> str:
        return _b64url(self.vault_key.public_key().encrypt(data_key, OAEP))

    def entry(self, data_key: bytes, name: str = KEY_NAME) -> dict[str, str]:
        return {
            "vault_url": self.url,
            "name": name,
            "version": KEY_VERSION,
            "created_at": "2024-11-12T13:33:42Z",
            "enc": self.encrypt(data_key),
        }

    def certificate_pem(self) -> str:
        key, cert = self.client_cert
        return (
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
            )
            + cert.public_bytes(serialization.Encoding.PEM)
        ).decode()

    async def token(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        self.requests.append({"path": request.path, "form": form})
        assert request.match_info["tenant"] == TENANT
        if form.get("scope") != self.scope or form.get("grant_type") != "client_credentials":
            return _aad_error("invalid_scope", "AADSTS70011: The provided value for scope is not valid.")
        if form.get("client_id") != CLIENT_ID:
            return _aad_error("unauthorized_client", "AADSTS700016: Application not found.")
        if "client_secret" in form:
            if form["client_secret"] != CLIENT_SECRET:
                return _aad_error("invalid_client", "AADSTS7000215: Invalid client secret provided.")
            return web.json_response(
                {"access_token": self.issuer.issue("secret"), "expires_in": 3599, "token_type": "Bearer"}
            )
        assertion = str(form.get("client_assertion", ""))
        assert form.get("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        if assertion == FEDERATED_TOKEN:
            return web.json_response({"access_token": self.issuer.issue("federated"), "expires_in": 3599})
        header, claims, signature = assertion.split(".")
        key, cert = self.client_cert
        thumbprint = _b64url(hashlib.sha1(cert.public_bytes(serialization.Encoding.DER)).digest())
        assert json.loads(_b64url_decode(header))["x5t"] == thumbprint
        key.public_key().verify(
            _b64url_decode(signature), f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256()
        )
        body = json.loads(_b64url_decode(claims))
        assert body["aud"] == f"{self.url}/{TENANT}/oauth2/v2.0/token" and body["iss"] == body["sub"] == CLIENT_ID
        return web.json_response({"access_token": self.issuer.issue("cert"), "expires_in": 3599})

    async def imds(self, request: web.Request) -> web.Response:
        self.requests.append({"path": request.path, "query": dict(request.query)})
        if request.headers.get("Metadata") != "true" or request.query.get("resource") != "https://127.0.0.1":
            return web.json_response({"error": "invalid_request", "error_description": "bad request"}, status=400)
        return web.json_response(
            {"access_token": self.issuer.issue("msi"), "expires_in": "3599", "token_type": "Bearer"}
        )

    async def decrypt(self, request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        raw = await request.read()
        self.requests.append({"path": request.path, "query": dict(request.query), "auth": auth, "body": raw})
        assert request.query.get("api-version")
        if not auth:
            assert raw == b""  # the challenge request carries no body
            return web.Response(
                status=401,
                headers={
                    "WWW-Authenticate": f'Bearer authorization="{self.url}/{TENANT}", resource="https://127.0.0.1"'
                },
            )
        if auth.removeprefix("Bearer ") not in self.issuer.tokens:
            return _kv_error(401, "Unauthorized", "AKV10000: Request is missing a Bearer or PoP token.")
        if self.forbidden:
            return _kv_error(
                403, "Forbidden", "Caller is not authorized to perform action on resource.", inner="ForbiddenByRbac"
            )
        if request.match_info["name"] != KEY_NAME or request.match_info["version"] != KEY_VERSION:
            return _kv_error(404, "KeyNotFound", f"A key with (name/id) {request.match_info['name']} was not found")
        body = json.loads(raw)
        assert body["alg"] == "RSA-OAEP-256" and "=" not in body["value"]
        try:
            plain = self.vault_key.decrypt(_b64url_decode(body["value"]), OAEP)
        except ValueError:
            return _kv_error(400, "BadParameter", "Decryption failed")
        return web.json_response({"kid": f"{self.url}/keys/{KEY_NAME}/{KEY_VERSION}", "value": _b64url(plain)})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/{tenant}/oauth2/v2.0/token", self.token)
        app.router.add_get("/metadata/identity/oauth2/token", self.imds)
        app.router.add_post("/keys/{name}/{version}/decrypt", self.decrypt)
        return app


def _aad_error(error: str, description: str) -> web.Response:
    return web.json_response({"error": error, "error_description": description}, status=400)


def _kv_error(status: int, code: str, message: str, inner: str | None = None) -> web.Response:
    error: dict[str, Any] = {"code": code, "message": message}
    if inner:
        error["innererror"] = {"code": inner}
    return web.json_response({"error": error}, status=status)


@pytest.fixture
async def fake_azure() -> AsyncIterator[FakeAzure]:
    azure = FakeAzure()
    runner, azure.url = await serve(azure.app())
    try:
        yield azure
    finally:
        await runner.cleanup()
