"""What a connection to one API server needs: its address, TLS settings and an authenticator.

Contract:
- ``ClientConfig.auth`` yields the ``Authorization`` header value per request (``None`` for none);
  ``await auth.refresh()`` re-reads or re-runs the credential after a 401 and says whether it
  changed.
- ``TokenFileAuth`` re-reads a projected token file every ``period`` seconds and after a 401 (bound
  tokens rotate); a read that fails keeps the last good token, the first one raises ``ConfigError``.
- ``ConfigError``: no usable cluster configuration could be loaded (``kube.config`` says what was
  tried).

The loaders (``kube.config``, ``kube.kubeconfig``) build these; this module reads no configuration.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kustomize_controller.kube.errors import KubeError
from kustomize_controller.kube.ratelimit import MonotonicClock, SystemClock


class ConfigError(KubeError):
    """No usable cluster configuration could be loaded."""


class Authenticator(Protocol):
    async def authorization(self) -> str | None: ...

    async def refresh(self) -> bool: ...


class NoAuth:
    async def authorization(self) -> str | None:
        return None

    async def refresh(self) -> bool:
        return False


@dataclass
class StaticToken:
    """A fixed bearer token (tests, or a token handed over explicitly)."""

    token: str

    async def authorization(self) -> str | None:
        return f"Bearer {self.token}"

    async def refresh(self) -> bool:
        return False


@dataclass
class ClientConfig:
    """Everything needed to open connections to one API server."""

    server: str
    auth: Authenticator = field(default_factory=NoAuth)
    ca_file: str | None = None
    ca_data: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify_ssl: bool = True
    tls_server_name: str | None = None
    proxy: str | None = None
    namespace: str = "default"
    source: str = ""

    def ssl_context(self) -> ssl.SSLContext | bool:
        if not self.server.startswith("https"):
            return False
        if not self.verify_ssl:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        if self.cert_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx


class TokenFileAuth:
    """A bearer token read from a file that is rotated underneath us (projected service-account
    tokens): re-read every ``period`` seconds, as client-go's cached token source does, and at once
    when ``refresh()`` is called after a 401."""

    def __init__(self, path: str, *, period: float = 60.0, clock: MonotonicClock | None = None) -> None:
        self.path = path
        self.period = period
        self._clock: MonotonicClock = clock or SystemClock()
        self._token = ""
        self._read_at: float | None = None

    def _read(self) -> bool:
        try:
            token = Path(self.path).read_text().strip()
        except OSError as err:
            if not self._token:
                raise ConfigError(f"service account token {self.path}: {err}") from err
            return False  # keep the last good token; the next period tries again
        self._read_at = self._clock.monotonic()
        changed = token != self._token
        if token:
            self._token = token
        return changed

    async def authorization(self) -> str | None:
        if self._read_at is None or self._clock.monotonic() - self._read_at >= self.period:
            self._read()
        return f"Bearer {self._token}" if self._token else None

    async def refresh(self) -> bool:
        return self._read()
