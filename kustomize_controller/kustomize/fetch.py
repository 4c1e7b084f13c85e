"""Artifact download: streamed to a file, digest verified while streaming, retried with backoff.

Contract:

- ``GET`` the artifact URL; when a host override is configured its host (``host[:port]``)
  replaces the URL's — ``SOURCE_CONTROLLER_LOCALHOST``, or ``SOURCE_WATCHER_LOCALHOST`` when the
  URL contains ``//source-watcher`` (see :func:`host_override_from_env`).
- Connection errors, timeouts, 429 and 5xx (except 501) are retried up to ``retries`` times
  (``--http-retry``, 9), waiting ``min_wait * 2**attempt`` capped at ``max_wait`` (5 s … 30 s)
  through the injected clock; ``Retry-After`` on 429/503 is honoured within the same bounds.
  Exhausted retries: "failed to download archive: GET <url> giving up after N attempt(s)".
- 404 → :class:`ArtifactNotFoundError`; any other non-200 → "failed to download archive from
  <url> (status: <code> <text>)".
- The body is written to ``dest`` chunk by chunk — never held whole in memory — and hashed on
  the way; above ``max_size`` bytes the download stops with :class:`ArtifactTooLargeError`.
- Digest ``algo:hex`` (``sha256``, ``sha512``; bare hex means sha256); empty, malformed or
  unsupported digests and mismatches are :class:`DigestError` naming both digests.
- Every request has a timeout (connect and per-read). Cancellation propagates; ``dest`` may then
  hold a partial file (the workspace removes it).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from kustomize_controller.kustomize.errors import (
    ArtifactNotFoundError,
    ArtifactTooLargeError,
    DigestError,
    DownloadError,
)
from kustomize_controller.runtime.clock import Clock
from kustomize_controller.runtime.files import open_off_loop

DEFAULT_MAX_SIZE = 256 << 20
_CHUNK = 1 << 16
_HEX = {"sha256": 64, "sha512": 128}


def host_override_from_env(url: str, env: Mapping[str, str] | None = None) -> str | None:
    """The host override upstream applies for ``url`` (empty variables mean none)."""
    env = os.environ if env is None else env
    key = "SOURCE_WATCHER_LOCALHOST" if "//source-watcher" in url else "SOURCE_CONTROLLER_LOCALHOST"
    return env.get(key) or None


def override_host(url: str, host: str | None) -> str:
    if not host:
        return url
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


@dataclass(frozen=True, slots=True)
class Digest:
    algorithm: str
    hex: str

    def __str__(self) -> str:
        return f"{self.algorithm}:{self.hex}"

    @classmethod
    def parse(cls, value: str) -> Digest:
        if not value:
            raise DigestError("failed to verify archive: empty digest")
        text = value if ":" in value else f"sha256:{value}"
        algorithm, _, hexpart = text.partition(":")
        if algorithm not in _HEX:
            raise DigestError(
                f"failed to verify archive: failed to parse digest '{text}': unsupported digest algorithm"
            )
        if len(hexpart) != _HEX[algorithm] or not re.fullmatch(r"[0-9a-f]+", hexpart):
            raise DigestError(
                f"failed to verify archive: failed to parse digest '{text}': invalid checksum digest format"
            )
        return cls(algorithm, hexpart)


def retry_after_seconds(value: str | None) -> float | None:
    """The delay of a ``Retry-After`` header in seconds, or None: only the delta-seconds form (ASCII digits;
    ``str.isdigit`` alone also takes ``²``, which ``float`` refuses) counts, an HTTP date is ignored."""
    if value and value.isascii() and value.isdigit():
        return float(value)
    return None


class ArtifactFetcher:
    """Downloads artifacts over a caller-owned aiohttp session (one per controller)."""

    def __init__(
        self,
        *,
        session: aiohttp.ClientSession,
        clock: Clock,
        retries: int = 9,
        max_size: int = DEFAULT_MAX_SIZE,
        connect_timeout: float = 30.0,
        read_timeout: float = 60.0,
        min_wait: float = 5.0,
        max_wait: float = 30.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._session = session
        self._clock = clock
        self._retries = retries
        self._max_size = max_size
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=read_timeout)
        self._min_wait = min_wait
        self._max_wait = max_wait
        self._env = env

    def _backoff(self, attempt: int, retry_after: str | None) -> float:
        seconds = retry_after_seconds(retry_after)
        if seconds is not None:
            return min(max(seconds, self._min_wait), self._max_wait)
        return float(min(self._min_wait * (2.0**attempt), self._max_wait))

    async def fetch(self, url: str, digest: str, dest: Path) -> int:
        """Download ``url`` to ``dest`` verifying ``digest``; return the number of bytes."""
        expected = Digest.parse(digest)
        target = override_host(url, host_override_from_env(url, self._env))
        attempt = 0
        while True:
            retry_after: str | None = None
            try:
                async with self._session.get(target, timeout=self._timeout) as resp:
                    if resp.status == 200:
                        return await self._save(resp, target, expected, dest)
                    if resp.status == 404:
                        raise ArtifactNotFoundError(target)
                    retryable = resp.status == 429 or (resp.status >= 500 and resp.status != 501)
                    if not retryable:
                        status = f"{resp.status} {resp.reason or ''}".strip()
                        raise DownloadError(f"failed to download archive from {target} (status: {status})")
                    retry_after = resp.headers.get("Retry-After")
                    last_error = ""
            except (aiohttp.ClientError, TimeoutError) as err:
                last_error = f": {type(err).__name__}: {err}" if str(err) else f": {type(err).__name__}"
            if attempt >= self._retries:
                raise DownloadError(
                    f"failed to download archive: GET {target} giving up after {attempt + 1} attempt(s){last_error}"
                )
            await self._clock.sleep(self._backoff(attempt, retry_after))
            attempt += 1

    async def _save(self, resp: aiohttp.ClientResponse, url: str, expected: Digest, dest: Path) -> int:
        if resp.content_length is not None and resp.content_length > self._max_size:
            raise ArtifactTooLargeError(
                f"artifact is {resp.content_length} bytes, greater than the max download size of {self._max_size} bytes"
            )
        hasher = hashlib.new(expected.algorithm)
        size = 0
        out = await open_off_loop(dest, "wb")
        with out:
            async for chunk in resp.content.iter_chunked(_CHUNK):
                size += len(chunk)
                if size > self._max_size:
                    raise ArtifactTooLargeError(
                        f"artifact is greater than the max download size of {self._max_size} bytes"
                    )
                hasher.update(chunk)
                out.write(chunk)
        actual = Digest(expected.algorithm, hasher.hexdigest())
        if actual.hex != expected.hex:
            # upstream's words (fluxcd/pkg http/fetch), which do not name the computed digest
            raise DigestError(
                f"failed to verify archive: computed digest doesn't match provided '{expected}' "
                "(check whether file size exceeds max download size)"
            )
        return size
