"""A loopback Vault/OpenBao server: the transit secrets engine and the Kubernetes/JWT auth method.

Follows Vault's documented HTTP API: ``/v1/<mount>/encrypt/<key>`` and ``/v1/<mount>/decrypt/<key>``
(``{"plaintext"}`` / ``{"ciphertext": "vault:v1:…"}``, answers under ``data``), ``/v1/<path>/login``
(``{"role", "jwt"}`` → ``auth.client_token``), the token in ``X-Vault-Token``, PUT and POST alike,
and errors as ``{"errors": [...]}`` with Vault's status codes (403 permission denied, 400 bad
input, 404 no route). Every request is recorded (method, path, headers, JSON body) so tests check
what the controller sent.

Kubernetes auth checks the JWT's claims (not its signature): ``sub`` against the role's bound
ServiceAccount, ``aud`` against the role's audience, and ``exp``.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from cryptography.hazmat.primitives.ciphers.aead import AESGCM


@dataclass
class Role:
    service_account: str  # "namespace:name"
    audience: str
    policies: tuple[str, ...]  # transit "<mount>/<key>" pairs this role's tokens may decrypt with


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeVault:
    keys: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (mount, key) → AES key
    tokens: dict[str, set[str] | None] = field(default_factory=dict)  # token → allowed "<mount>/<key>" (None: root)
    login_mounts: dict[str, dict[str, Role]] = field(default_factory=dict)  # login path → role name → role
    requests: list[Recorded] = field(default_factory=list)
    url: str = ""
    _runner: web.AppRunner | None = None

    # ------------------------------------------------------------------ set-up

    def add_key(self, mount: str, name: str) -> None:
        self.keys[(mount, name)] = AESGCM.generate_key(bit_length=256)

    def add_token(self, token: str, allowed: set[str] | None = None) -> None:
        self.tokens[token] = allowed

    def add_role(self, login_path: str, name: str, role: Role) -> None:
        self.login_mounts.setdefault(login_path, {})[name] = role

    def encrypt(self, mount: str, name: str, plaintext: bytes) -> str:
        nonce = os.urandom(12)
        sealed = AESGCM(self.keys[(mount, name)]).encrypt(nonce, plaintext, None)
        return "vault:v1:" + base64.b64encode(nonce + sealed).decode()

    # ------------------------------------------------------------------ server

    async def start(self) -> str:
        from tests.loopback import serve

        app = web.Application()
        app.router.add_route("*", "/v1/{tail:.*}", self._handle)
        self._runner, self.url = await serve(app)
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            return _errors(400, "failed to parse JSON input")
        path = request.match_info["tail"]
        self.requests.append(Recorded(request.method, "/v1/" + path, dict(request.headers), body))
        if request.method not in ("PUT", "POST"):
            return _errors(405, "unsupported operation")
        if path in self.login_mounts:
            return self._login(self.login_mounts[path], body)
        parts = path.split("/")
        if len(parts) >= 3 and parts[-2] in ("encrypt", "decrypt"):
            mount, operation, name = "/".join(parts[:-2]), parts[-2], parts[-1]
            if any(m == mount for m, _ in self.keys):
                return self._transit(request, mount, operation, name, body)
        return _errors(404, f'no handler for route "{path}". route entry not found.')

    def _transit(self, request: web.Request, mount: str, operation: str, name: str, body: Any) -> web.Response:
        token = request.headers.get("X-Vault-Token", "")
        if token not in self.tokens:
            return _errors(403, "permission denied")
        allowed = self.tokens[token]
        if allowed is not None and f"{mount}/{name}" not in allowed:
            return _errors(403, "1 error occurred:\n\t* permission denied\n\n")
        key = self.keys.get((mount, name))
        if key is None:
            return _errors(400, "encryption key not found")
        if operation == "encrypt":
            plaintext = base64.b64decode(str(body.get("plaintext", "")))
            return _data({"ciphertext": self.encrypt(mount, name, plaintext), "key_version": 1})
        ciphertext = str(body.get("ciphertext", ""))
        if not ciphertext.startswith("vault:v1:"):
            return _errors(400, "invalid ciphertext: no prefix")
        try:
            blob = base64.b64decode(ciphertext[len("vault:v1:"):])
            plaintext = AESGCM(key).decrypt(blob[:12], blob[12:], None)
        except Exception:
            return _errors(400, "cipher: message authentication failed")
        return _data({"plaintext": base64.b64encode(plaintext).decode()})

    def _login(self, roles: dict[str, Role], body: Any) -> web.Response:
        role_name, jwt = str(body.get("role", "")), str(body.get("jwt", ""))
        if not jwt:
            return _errors(400, "missing jwt")
        role = roles.get(role_name)
        if role is None:
            return _errors(400, f'invalid role name "{role_name}"')
        try:
            payload = jwt.split(".")[1]
            claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (IndexError, ValueError):
            return _errors(403, "permission denied")
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else list(audiences or [])
        if role.audience not in audiences:
            return _errors(403, "invalid audience (aud) claim: audience claim does not match any expected audience")
        if float(claims.get("exp", 0)) < time.time():
            return _errors(403, "token is expired")
        if claims.get("sub") != f"system:serviceaccount:{role.service_account}":
            return _errors(403, "permission denied")
        token = "hvs." + secrets.token_urlsafe(18)
        self.tokens[token] = set(role.policies)
        return web.json_response({"auth": {
            "client_token": token, "accessor": secrets.token_hex(8), "policies": ["default"],
            "lease_duration": 3600, "renewable": True,
        }})


def _data(data: dict[str, Any]) -> web.Response:
    return web.json_response({"request_id": secrets.token_hex(8), "lease_id": "", "renewable": False,
                              "lease_duration": 0, "data": data, "wrap_info": None, "warnings": None,
                              "auth": None})


def _errors(status: int, *messages: str) -> web.Response:
    return web.json_response({"errors": list(messages)}, status=status)
