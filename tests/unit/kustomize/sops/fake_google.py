"""A loopback Google: OAuth token endpoint (service-account JWT, refresh token, STS token
exchange), Cloud KMS ``:decrypt`` (REST, documented request/answer/error shapes), IAM
``generateAccessToken`` and the metadata server. It checks what the controller sends (JWT
signature, audience and scopes, bearer tokens, body fields) and records every request."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tests.loopback import serve

from .loopback import Issuer

KEY = "projects/p/locations/global/keyRings/flux/cryptoKeys/sops"
SA_EMAIL = "sops@p.iam.gserviceaccount.com"
REFRESH_TOKEN = "1//REFRESH-never-leak"
CLIENT_SECRET = "CLIENT-SECRET-never-leak"


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class FakeGoogle:
    url: str = ""
    private_key: rsa.RSAPrivateKey = field(default_factory=lambda: rsa.generate_private_key(65537, 2048))
    key_secrets: dict[str, bytes] = field(default_factory=dict)
    issuer: Issuer = field(default_factory=Issuer)
    requests: list[dict[str, Any]] = field(default_factory=list)
    allowed: set[str] = field(default_factory=set)  # tokens allowed to decrypt; empty: all

    def encrypt(self, name: str, data_key: bytes) -> str:
        secret = self.key_secrets.setdefault(name, os.urandom(32))
        nonce = os.urandom(12)
        return base64.b64encode(nonce + AESGCM(secret).encrypt(nonce, data_key, None)).decode()

    def service_account_json(self) -> bytes:
        pem = self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
        return json.dumps(
            {
                "type": "service_account",
                "project_id": "p",
                "private_key_id": "kid1",
                "private_key": pem,
                "client_email": SA_EMAIL,
                "token_uri": f"{self.url}/token",
            }
        ).encode()

    def authorized_user_json(self) -> bytes:
        return json.dumps(
            {
                "type": "authorized_user",
                "client_id": "cid.apps.googleusercontent.com",
                "client_secret": CLIENT_SECRET,
                "refresh_token": REFRESH_TOKEN,
                "token_uri": f"{self.url}/token",
            }
        ).encode()

    # -- handlers ---------------------------------------------------------------------------------

    async def token(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        self.requests.append({"path": "/token", "form": form})
        grant = form.get("grant_type")
        if grant == "urn:ietf:params:oauth:grant-type:jwt-bearer":
            header, claims, signature = str(form["assertion"]).split(".")
            public = self.private_key.public_key()
            try:
                public.verify(
                    _b64url_decode(signature), f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256()
                )
            except Exception:
                return web.json_response(
                    {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}, status=400
                )
            body = json.loads(_b64url_decode(claims))
            assert json.loads(_b64url_decode(header))["kid"] == "kid1"
            assert body["aud"] == f"{self.url}/token" and body["iss"] == SA_EMAIL
            assert "https://www.googleapis.com/auth/cloudkms" in body["scope"].split()
            return web.json_response(
                {"access_token": self.issuer.issue("sa"), "expires_in": 3599, "token_type": "Bearer"}
            )
        if grant == "refresh_token":
            basic = request.headers.get("Authorization", "").removeprefix("Basic ")
            if basic:  # external_account_authorized_user: the client authenticates with HTTP Basic
                assert "client_secret" not in form
                form["client_secret"] = base64.b64decode(basic).decode().partition(":")[2]
                form["_basic_auth"] = "yes"
            if form.get("refresh_token") != REFRESH_TOKEN or form.get("client_secret") != CLIENT_SECRET:
                return web.json_response({"error": "invalid_grant", "error_description": "Bad Request"}, status=400)
            return web.json_response({"access_token": self.issuer.issue("user"), "expires_in": 3599})
        if grant == "urn:ietf:params:oauth:grant-type:token-exchange":
            if form.get("subject_token") != "external-subject-token" or not str(form.get("audience")).startswith(
                "//iam.googleapis.com/"
            ):
                return web.json_response({"error": "invalid_grant", "error_description": "bad subject"}, status=400)
            return web.json_response(
                {"access_token": self.issuer.issue("sts"), "expires_in": 3600, "token_type": "Bearer"}
            )
        return web.json_response({"error": "unsupported_grant_type"}, status=400)

    def _bearer(self, request: web.Request) -> str | None:
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ")
        return token if auth.startswith("Bearer ") and token in self.issuer.tokens else None

    async def decrypt(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        body = await request.json()
        self.requests.append(
            {"path": f"/v1/{name}:decrypt", "body": body, "auth": request.headers.get("Authorization")}
        )
        token = self._bearer(request)
        if token is None:
            return _google_error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
        if (self.allowed and token not in self.allowed) or name not in self.key_secrets:
            return _google_error(
                403,
                "PERMISSION_DENIED",
                f"Permission 'cloudkms.cryptoKeyVersions.useToDecrypt' denied on resource '{name}' "
                "(or it may not exist).",
            )
        assert set(body) == {"ciphertext"}  # sops sends no AAD, no CRC32C
        raw = base64.b64decode(body["ciphertext"])
        try:
            plain = AESGCM(self.key_secrets[name]).decrypt(raw[:12], raw[12:], None)
        except Exception:
            return _google_error(400, "INVALID_ARGUMENT", "Decryption failed: the ciphertext is invalid.")
        return web.json_response({"plaintext": base64.b64encode(plain).decode(), "usedPrimary": True})

    async def generate_access_token(self, request: web.Request) -> web.Response:
        self.requests.append({"path": request.path, "body": await request.json()})
        if self._bearer(request) is None:
            return _google_error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
        return web.json_response(
            {"accessToken": self.issuer.issue("impersonated"), "expireTime": "2099-01-01T00:00:00Z"}
        )

    async def metadata_token(self, request: web.Request) -> web.Response:
        self.requests.append({"path": request.path})
        if request.headers.get("Metadata-Flavor") != "Google":
            return web.Response(status=403, text="Missing Metadata-Flavor:Google header.")
        token = self.issuer.issue("gce")
        return web.json_response({"access_token": token, "expires_in": 3599, "token_type": "Bearer"})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/token", self.token)
        app.router.add_post("/v1/{name:projects/.+}:decrypt", self.decrypt)
        app.router.add_post("/v1/projects/-/serviceAccounts/{email}:generateAccessToken", self.generate_access_token)
        app.router.add_get("/computeMetadata/v1/instance/service-accounts/default/token", self.metadata_token)
        return app


def _google_error(code: int, status: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message, "status": status}}, status=code)


@pytest.fixture
async def fake_google() -> AsyncIterator[FakeGoogle]:
    google = FakeGoogle()
    runner, google.url = await serve(google.app())
    try:
        yield google
    finally:
        await runner.cleanup()
