"""HashiCorp Vault / OpenBao transit master keys (sops ``hc_vault``), as upstream decrypts them.

Contract:
- ``VaultKeyService.decrypt(key)`` recovers a data key: ``PUT <vault_address>/v1/<engine_path>/
  decrypt/<key_name>`` with ``{"ciphertext": <enc>}`` and the headers ``X-Vault-Token`` (when a
  token is known), ``X-Vault-Request: true`` and ``X-Vault-Namespace`` (``VAULT_NAMESPACE``); the
  answer's ``data.plaintext`` (std base64) is the key. ``VAULT_ADDR`` plays no part: the address
  is the file's.
- The token, in upstream's order (``VaultTokens``): the decryption Secret's ``sops.vault-token``
  (whitespace-trimmed; empty counts as absent) for every address; else, with
  ``--sops-vault-configmap``, a login per address through Kubernetes/JWT auth (``vault_auth.py``;
  an address missing from the ConfigMap is an error, never a fall-back); else ``VAULT_TOKEN``,
  then ``~/.vault-token``, then none (Vault answers 403).
- ``SOPS_HC_VAULT_ALLOWLIST`` as sops: ``all`` (default), ``none``, or comma-separated URI
  prefixes; errors ``Allowlist does not allow <addr>`` / ``SOPS_HC_VAULT_ALLOWLIST's entry N is
  empty``.
- Errors, as the Go Vault client and sops word them: ``failed to decrypt sops data key from Vault
  transit backend '<engine>/decrypt/<key>': Error making API request.\\n\\nURL: PUT <url>\\nCode:
  403. Errors:\\n\\n* permission denied`` (or ``transit backend is empty``, ``no decrypted data``,
  ``decrypted plaintext data cannot be cast to string``, ``cannot decode base64 plaintext into
  data key bytes``). No token ever appears in one.
- Every call has a timeout: ``VAULT_CLIENT_TIMEOUT`` (seconds or a Go duration; default 60s, as the
  Go client). TLS from ``VAULT_CACERT``/``VAULT_CAPATH``/``VAULT_CLIENT_CERT``+``VAULT_CLIENT_KEY``/
  ``VAULT_SKIP_VERIFY``/``VAULT_TLS_SERVER_NAME``. Not done: the Go client's ``VAULT_MAX_RETRIES``
  retries of 5xx answers (a failed decryption is retried with the reconcile).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import os
import posixpath
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kustomize_controller.kustomize.sops.errors import SopsKeyError
from kustomize_controller.kustomize.sops.metadata import MasterKey

if TYPE_CHECKING:
    import aiohttp

VAULT_TOKEN_KEY = "sops.vault-token"
ALLOWLIST_ENV = "SOPS_HC_VAULT_ALLOWLIST"
DEFAULT_TIMEOUT = 60.0


class VaultError(SopsKeyError):
    """A Vault call failed; the message follows the Go client's and never holds a token."""


@dataclass(frozen=True)
class VaultClientConfig:
    """What the Go client reads from the environment (``api.DefaultConfig`` + ``NewClient``)."""

    timeout: float = DEFAULT_TIMEOUT
    namespace: str = ""
    ssl: ssl.SSLContext | bool = True
    server_hostname: str | None = None
    env_token: str = ""
    token_file: Path | None = None
    allowlist: str = "all"

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, home: Path | None = None) -> VaultClientConfig:
        """Reads CA files (call it once, at start-up, not on the event loop's hot path)."""
        home = home if home is not None else Path(env.get("HOME") or Path.home())
        return cls(
            timeout=_timeout(env.get("VAULT_CLIENT_TIMEOUT", "")),
            namespace=env.get("VAULT_NAMESPACE", ""),
            ssl=_ssl_context(env),
            server_hostname=env.get("VAULT_TLS_SERVER_NAME") or None,
            env_token=env.get("VAULT_TOKEN", "").strip(),
            token_file=home / ".vault-token",
            allowlist=env.get(ALLOWLIST_ENV) or "all",
        )


def _timeout(text: str) -> float:
    if not text:
        return DEFAULT_TIMEOUT
    try:
        return float(int(text))
    except ValueError:
        from kustomize_controller.api.duration import parse_duration

        try:
            return parse_duration(text).total_seconds()
        except ValueError:
            return DEFAULT_TIMEOUT


def _ssl_context(env: Mapping[str, str]) -> ssl.SSLContext | bool:
    cacert, capath = env.get("VAULT_CACERT", ""), env.get("VAULT_CAPATH", "")
    cert, key = env.get("VAULT_CLIENT_CERT", ""), env.get("VAULT_CLIENT_KEY", "")
    skip = env.get("VAULT_SKIP_VERIFY", "").lower() in ("1", "t", "true")
    if not (cacert or capath or cert or skip):
        return True
    context = ssl.create_default_context(cafile=cacert or None, capath=capath or None)
    if cert:
        context.load_cert_chain(cert, key or None)
    if skip:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def check_allowlist(text: str, address: str) -> None:
    """Raises ``VaultError`` when ``SOPS_HC_VAULT_ALLOWLIST`` (``text``) refuses ``address``."""
    if text == "all":
        return
    prefixes: list[str] = []
    if text != "none":
        for index, entry in enumerate(text.split(","), start=1):
            entry = entry.strip(" ")
            if not entry:
                raise VaultError(f"{ALLOWLIST_ENV}'s entry {index} is empty")
            prefixes.append(entry if entry.endswith("/") else entry + "/")
    candidate = address if address.endswith("/") else address + "/"
    if not any(candidate.startswith(prefix) for prefix in prefixes):
        raise VaultError(f"Allowlist does not allow {address}")


def _join(*parts: str) -> str:
    """Go's ``path.Join``: non-empty parts joined by ``/``, then cleaned."""
    joined = "/".join(p for p in parts if p)
    return posixpath.normpath(joined) if joined else ""


class VaultRequestError(Exception):
    """The Go client's error text for one request (``ResponseError`` or a transport failure)."""


async def vault_write(
    session: aiohttp.ClientSession,
    config: VaultClientConfig,
    *,
    address: str,
    path: str,
    body: Mapping[str, Any],
    token: str,
) -> dict[str, Any] | None:
    """``Logical().Write``: PUT ``<address>/v1/<path>``; the parsed answer, or ``None`` for an empty
    one. Raises ``VaultRequestError``."""
    import aiohttp
    from yarl import URL

    base = URL(address)
    url = base.with_path("/" + _join(base.path.strip("/"), "v1", path.lstrip("/")))
    headers = {"X-Vault-Request": "true"}
    if token:
        headers["X-Vault-Token"] = token
    if config.namespace:
        headers["X-Vault-Namespace"] = config.namespace
    try:
        async with session.put(
            url,
            json=dict(body),
            headers=headers,
            ssl=config.ssl,
            server_hostname=config.server_hostname,
            timeout=aiohttp.ClientTimeout(total=config.timeout),
        ) as response:
            raw = await response.read()
            status = response.status
    except TimeoutError:
        raise VaultRequestError(f'Put "{url}": timed out after {config.timeout:g}s') from None
    except aiohttp.ClientError as err:
        raise VaultRequestError(f'Put "{url}": {err}') from None
    if not (200 <= status < 400 or status == 429):
        if status == 404 and not raw.strip():
            return None
        raise VaultRequestError(_response_error(url, status, raw))
    if not raw.strip():
        return None
    try:
        parsed = json.loads(raw)
    except ValueError as err:
        raise VaultRequestError(f"invalid character in the response of PUT {url}: {err}") from None
    return parsed if isinstance(parsed, dict) else None


def _response_error(url: object, status: int, raw: bytes) -> str:
    head = f"Error making API request.\n\nURL: PUT {url}\nCode: {status}."
    try:
        decoded = json.loads(raw)
    except ValueError:
        decoded = None
    errors = decoded.get("errors") if isinstance(decoded, dict) else None
    if not isinstance(errors, list):
        return f"{head} Raw Message:\n\n{raw.decode('utf-8', errors='replace')}"
    return f"{head} Errors:\n\n" + "".join(f"* {e}" for e in errors)


def data_key_from_answer(answer: Mapping[str, Any] | None) -> bytes:
    data = answer.get("data") if answer is not None else None
    if not isinstance(data, Mapping):
        raise ValueError("transit backend is empty")
    if "plaintext" not in data:
        raise ValueError("no decrypted data")
    plaintext = data["plaintext"]
    if not isinstance(plaintext, str):
        raise ValueError("decrypted plaintext data cannot be cast to string")
    try:
        return base64.b64decode(plaintext, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("cannot decode base64 plaintext into data key bytes") from None


class LoginSource(Protocol):
    """Kubernetes/JWT auth: a Vault token for one address (``vault_auth.VaultKubernetesAuth``)."""

    async def token_for(self, address: str) -> str: ...


class VaultTokens:
    """The token each Vault address gets during one reconcile, in upstream's order."""

    def __init__(self, *, secret_token: str, login: LoginSource | None, config: VaultClientConfig) -> None:
        self._secret_token = secret_token.strip()
        self._login = login
        self._config = config

    @classmethod
    def from_secret_data(
        cls, data: Mapping[str, bytes], *, login: LoginSource | None, config: VaultClientConfig
    ) -> VaultTokens:
        raw = data.get(VAULT_TOKEN_KEY, b"")
        return cls(secret_token=raw.decode("utf-8", errors="replace"), login=login, config=config)

    @property
    def handled_by_controller(self) -> bool:
        """Upstream's own key service handles Vault (else sops' default server, with ambient tokens)."""
        return bool(self._secret_token) or self._login is not None

    async def token_for(self, address: str) -> str:
        if self._secret_token:
            return self._secret_token
        if self._login is not None:
            return await self._login.token_for(address)
        return ""

    async def ambient_token(self) -> str:
        """sops' default server: ``VAULT_TOKEN``, else ``~/.vault-token``, else none."""
        if self._config.env_token:
            return self._config.env_token
        path = self._config.token_file
        if path is None:
            return ""
        try:
            text = await asyncio.to_thread(path.read_text, encoding="utf-8")
        except FileNotFoundError:
            return ""
        except OSError as err:
            raise VaultError(f"cannot get Vault token: {err.strerror or err}") from None
        return text.strip()


class VaultKeyService:
    """Decrypts ``hc_vault`` master keys with the tokens of one reconcile."""

    def __init__(self, *, session: aiohttp.ClientSession, config: VaultClientConfig, tokens: VaultTokens) -> None:
        self._session = session
        self._config = config
        self._tokens = tokens

    async def decrypt(self, key: MasterKey) -> bytes:
        address = key.name
        engine_path = key.extra.get("engine_path", "")
        key_name = key.extra.get("key_name", "")
        full_path = _join(engine_path, "decrypt", key_name)
        if self._tokens.handled_by_controller:
            token = await self._tokens.token_for(address)
            check_allowlist(self._config.allowlist, address)
        else:
            check_allowlist(self._config.allowlist, address)
            token = await self._tokens.ambient_token()
        prefix = f"failed to decrypt sops data key from Vault transit backend '{full_path}'"
        try:
            answer = await vault_write(
                self._session, self._config, address=address, path=full_path,
                body={"ciphertext": key.enc}, token=token,
            )
            return data_key_from_answer(answer)
        except (VaultRequestError, ValueError) as err:
            raise VaultError(f"{prefix}: {err}") from None


def default_config() -> VaultClientConfig:
    return VaultClientConfig.from_env(os.environ)
