"""HashiCorp Vault / OpenBao transit master keys (sops ``hc_vault``), as upstream decrypts them.

Contract:
- ``decrypt_data_key(key, context)`` (the key-service entry point) recovers a data key:
  ``PUT <vault_address>/v1/<engine_path>/decrypt/<key_name>`` with ``{"ciphertext": <enc>}`` and
  the headers ``X-Vault-Token`` (when a token is known), ``X-Vault-Request: true`` and
  ``X-Vault-Namespace`` (``VAULT_NAMESPACE``); the answer's ``data.plaintext`` (std base64) is
  the key. ``VAULT_ADDR`` plays no part: the address is the file's.
- The token, in upstream's order: ``context.credentials.vault`` — the decryption Secret's
  ``sops.vault-token`` (``parse_static``: whitespace-trimmed, an empty one counts as absent) for
  every address, else, with ``--sops-vault-configmap``, a login per address through
  Kubernetes/JWT auth (``vault_auth.py``; an address missing from the ConfigMap is an error,
  never a fall-back); without either, the controller's ``VAULT_TOKEN``, then ``~/.vault-token``
  (``HOME`` of the key services' environment), then none (Vault answers 403).
- ``SOPS_HC_VAULT_ALLOWLIST`` as sops: ``all`` (default), ``none``, or comma-separated URI
  prefixes; errors ``Allowlist does not allow <addr>`` / ``SOPS_HC_VAULT_ALLOWLIST's entry N is
  empty``.
- Errors, as the Go Vault client and sops word them: ``failed to decrypt sops data key from Vault
  transit backend '<engine>/decrypt/<key>': Error making API request.\\n\\nURL: PUT <url>\\nCode:
  403. Errors:\\n\\n* permission denied`` (or ``transit backend is empty``, ``no decrypted data``,
  ``decrypted plaintext data cannot be cast to string``, ``cannot decode base64 plaintext into
  data key bytes``). No token ever appears in one.
- Every call has a timeout: ``VAULT_CLIENT_TIMEOUT`` (seconds or a Go duration), else the key
  services' per-call timeout (the Go client's default is 60s, beyond the per-key deadline).
  TLS from ``VAULT_CACERT``/``VAULT_CAPATH``/``VAULT_CLIENT_CERT``+``VAULT_CLIENT_KEY``/
  ``VAULT_SKIP_VERIFY``/``VAULT_TLS_SERVER_NAME``; ``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY`` as
  the key services read them (``http.proxy_for``). An answer larger than the key services' 1 MiB
  (``http.MAX_BODY``) is an error, ``Put "<url>": the answer is larger than 1048576 bytes``. Not
  done: the Go client's ``VAULT_MAX_RETRIES`` retries of 5xx answers (a failed decryption is
  retried with the reconcile).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import posixpath
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kustomize_controller.kustomize.sops.keys.credentials import (
    CredentialError,
    Credentials,
    KeyServiceContext,
    VaultTokenSource,
)
from kustomize_controller.kustomize.sops.metadata import MasterKey

VAULT_TOKEN_KEY = "sops.vault-token"
ALLOWLIST_ENV = "SOPS_HC_VAULT_ALLOWLIST"
DEFAULT_TIMEOUT = 60.0


class VaultError(CredentialError):
    """A Vault call failed; the message follows the Go client's and never holds a token."""


@dataclass(frozen=True)
class VaultClientConfig:
    """What the Go client reads from the environment (``api.DefaultConfig`` + ``NewClient``)."""

    timeout: float = DEFAULT_TIMEOUT
    namespace: str = ""
    ssl: ssl.SSLContext | bool = True
    server_hostname: str | None = None
    env_token: str = field(default="", repr=False)  # VAULT_TOKEN
    token_file: Path | None = None
    allowlist: str = "all"
    # HTTPS_PROXY/HTTP_PROXY/NO_PROXY (the Go client's http.ProxyFromEnvironment)
    proxy_env: Mapping[str, str] = field(default_factory=dict, repr=False)  # a proxy URL may hold a password

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
            proxy_env={k: v for k, v in env.items() if k.lower() in ("https_proxy", "http_proxy", "no_proxy")},
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


#: the body fields of a Vault request that carry a secret (a login's JWT, an AppRole secret_id, …)
_SECRET_BODY_FIELDS = frozenset({"jwt", "secret_id", "password", "token"})


class VaultRequestError(Exception):
    """The Go client's error text for one request (``ResponseError`` or a transport failure)."""


async def vault_write(
    config: VaultClientConfig,
    *,
    address: str,
    path: str,
    body: Mapping[str, Any],
    token: str,
) -> dict[str, Any] | None:
    """``Logical().Write``: PUT ``<address>/v1/<path>``; the parsed answer, or ``None`` for an empty
    one. Raises ``VaultRequestError``. One connection per call: a reconcile makes at most one
    login and one decryption per Vault key, and no session outlives it."""
    import aiohttp
    from yarl import URL

    from kustomize_controller.kustomize.sops.keys.http import TOO_LARGE, proxy_for, read_body, scrub

    base = URL(address)
    url = base.with_path("/" + _join(base.path.strip("/"), "v1", path.lstrip("/")))
    headers = {"X-Vault-Request": "true"}
    if token:
        headers["X-Vault-Token"] = token
    if config.namespace:
        headers["X-Vault-Namespace"] = config.namespace
    try:
        async with aiohttp.ClientSession() as session, session.put(
            url,
            json=dict(body),
            headers=headers,
            ssl=config.ssl,
            server_hostname=config.server_hostname,
            proxy=proxy_for(str(url), config.proxy_env),
            timeout=aiohttp.ClientTimeout(total=config.timeout),
        ) as response:
            raw = await read_body(response)
            status = response.status
    except TimeoutError:
        raise VaultRequestError(f'Put "{url}": timed out after {config.timeout:g}s') from None
    except aiohttp.ClientError as err:
        raise VaultRequestError(f'Put "{url}": {err}') from None
    if raw is None:  # a decryption's answer holds the data key: none of it goes into the message
        raise VaultRequestError(f'Put "{url}": {TOO_LARGE}')
    if not (200 <= status < 400 or status == 429):
        if status == 404 and not raw.strip():
            return None
        # an answer that echoes the request must not carry the token or a login's secret into a message
        sent = [token, *(str(v) for k, v in body.items() if k in _SECRET_BODY_FIELDS)]
        raise VaultRequestError(scrub(_response_error(url, status, raw), sent))
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


class StaticVaultToken:
    """``sops.vault-token`` from the decryption Secret: one token for every address."""

    def __init__(self, token: str) -> None:
        self._token = token

    def __repr__(self) -> str:
        return "StaticVaultToken(<redacted>)"

    async def vault_token(self, address: str) -> str | None:
        return self._token


def parse_static(value: bytes, context: KeyServiceContext | None = None) -> Credentials:
    """The ``sops.vault-token`` entry (whitespace-trimmed; an empty one counts as absent)."""
    token = value.decode("utf-8", errors="replace").strip()
    return Credentials(vault=StaticVaultToken(token)) if token else Credentials()


async def ambient_token(config: VaultClientConfig) -> str:
    """sops' default server: ``VAULT_TOKEN``, else ``~/.vault-token``, else none."""
    if config.env_token:
        return config.env_token
    path = config.token_file
    if path is None:
        return ""
    try:
        text = await asyncio.to_thread(path.read_text, encoding="utf-8")
    except FileNotFoundError:
        return ""
    except OSError as err:
        raise VaultError(f"cannot get Vault token: {err.strerror or err}") from None
    return text.strip()


async def client_config(context: KeyServiceContext) -> VaultClientConfig:
    """The Vault client settings from the key services' environment (``VAULT_CLIENT_TIMEOUT``
    unset: the key services' per-call timeout)."""
    environ = context.environ
    if "VAULT_CLIENT_TIMEOUT" not in environ:
        environ = {**environ, "VAULT_CLIENT_TIMEOUT": f"{context.timeout:g}s"}
    return await asyncio.to_thread(VaultClientConfig.from_env, environ)


async def decrypt_data_key(key: MasterKey, context: KeyServiceContext) -> bytes:
    """The key-service entry point (``services.KEY_SERVICES['hc_vault']``)."""
    config = await client_config(context)
    return await decrypt_with(key, config, context.credentials.vault)


async def decrypt_with(key: MasterKey, config: VaultClientConfig, source: VaultTokenSource | None) -> bytes:
    address = key.name
    full_path = _join(key.extra.get("engine_path", ""), "decrypt", key.extra.get("key_name", ""))
    if source is not None:  # upstream's own key service: Secret token or Kubernetes auth
        token = await source.vault_token(address) or ""
        check_allowlist(config.allowlist, address)
    else:  # sops' default key service: the controller's ambient token
        check_allowlist(config.allowlist, address)
        token = await ambient_token(config)
    try:
        answer = await vault_write(config, address=address, path=full_path, body={"ciphertext": key.enc}, token=token)
        return data_key_from_answer(answer)
    except (VaultRequestError, ValueError) as err:
        raise VaultError(f"failed to decrypt sops data key from Vault transit backend '{full_path}': {err}") from None
