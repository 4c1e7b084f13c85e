"""One HTTP exchange with a key service or a credential endpoint, for every provider.

Contract:
- :func:`call` sends one request on a fresh aiohttp session and returns status, headers and the
  whole body (at most 1 MiB). Every call has a total timeout; proxies and ``.netrc`` from the
  environment are not used (``trust_env`` off: the controller's environment is explicit).
- :func:`read_token_file` reads a projected token or credential file in a worker thread.
- Transport failures and timeouts raise :class:`TransportError` whose message names the method
  and the URL without its query (``<METHOD> <scheme://host/path>: <reason>``); request bodies and
  headers (credentials) never appear in a message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from kustomize_controller.kustomize.sops.errors import SopsKeyError

MAX_BODY = 1 << 20


class TransportError(SopsKeyError):
    """The request did not get an answer (connection, TLS, timeout)."""


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def redact_url(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


async def call(
    method: str,
    url: str,
    *,
    timeout: float,  # noqa: ASYNC109 - aiohttp's total timeout, one per request
    headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
) -> Response:
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout), trust_env=False) as session,
            session.request(method, url, headers=dict(headers or {}), data=body, allow_redirects=False) as answer,
        ):
            data = await answer.content.read(MAX_BODY)
            return Response(answer.status, {k.lower(): v for k, v in answer.headers.items()}, data)
    except TimeoutError:
        raise TransportError(f"{method} {redact_url(url)}: no answer within {timeout:g}s") from None
    except asyncio.CancelledError:
        raise
    except aiohttp.ClientError as err:
        raise TransportError(f"{method} {redact_url(url)}: {_reason(err)}") from None


async def read_token_file(path: str, what: str) -> str:
    """A token file's content, stripped, read off the event loop; errors name the file only."""

    def read() -> str:
        with open(path, encoding="utf-8") as stream:
            return stream.read(MAX_BODY).strip()

    try:
        return await asyncio.to_thread(read)
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) else "not UTF-8"
        raise TransportError(f"failed to read {what} '{path}': {reason}") from None


def _reason(err: aiohttp.ClientError) -> str:
    if isinstance(err, aiohttp.ClientConnectorError):
        return f"cannot connect: {err.os_error.strerror or err.os_error}"
    return type(err).__name__
