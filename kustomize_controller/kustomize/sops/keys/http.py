"""One HTTP exchange with a key service or a credential endpoint, for every provider.

Contract:
- :func:`call` sends one request on a fresh aiohttp session and returns status, headers and the
  whole body (more than 1 MiB is an error; :func:`read_body` is that capped read, for the clients
  that hold their own session, such as Vault's). Every call has a total timeout.
- Proxies come from the ``environ`` snapshot given, never from the process (aiohttp's
  ``trust_env`` is off, ``.netrc`` is not read): ``HTTPS_PROXY``/``HTTP_PROXY`` (lower case too)
  and ``NO_PROXY`` (``*``, host names matching themselves and their subdomains, IPs, CIDRs, an
  optional port), as Go's ``http.ProxyFromEnvironment``; loopback is never proxied.
- :func:`read_token_file` reads a projected token or credential file in a worker thread.
- Transport failures and timeouts raise :class:`TransportError` whose message names the method
  and the URL without its query (``<METHOD> <scheme://host/path>: <reason>``); request bodies and
  headers (credentials) never appear in a message.
- :func:`scrub` takes the secrets a request sent out of text quoted from its answer (an error body
  that echoes the request must not carry a token into a status or a log).
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

import aiohttp

from kustomize_controller.kustomize.sops.errors import SopsKeyError

MAX_BODY = 1 << 20
#: a node's metadata server (cloud credentials) answers from the node itself: off a cloud node, where
#: there is none, it must not hold a key service for its whole per-call timeout
METADATA_TIMEOUT = 5.0
TOO_LARGE = f"the answer is larger than {MAX_BODY} bytes"


class TransportError(SopsKeyError):
    """The request did not get an answer (connection, TLS, timeout)."""


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every non-empty secret of ``secrets`` (and its form-encoded spelling) replaced."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        for spelling in {secret, quote_plus(secret), quote(secret, safe="")}:
            text = text.replace(spelling, "[redacted]")
    return text


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
    environ: Mapping[str, str] | None = None,
    cafile: str | None = None,
) -> Response:
    """``cafile``: PEM bundle of the CAs to trust for this call (e.g. ``AWS_CA_BUNDLE``) instead of
    the system's (which ``SSL_CERT_FILE``/``SSL_CERT_DIR`` already move, through OpenSSL)."""
    proxy = proxy_for(url, environ or {})
    ssl_context: ssl.SSLContext | bool = True
    if cafile and url.startswith("https://"):
        try:
            ssl_context = await asyncio.to_thread(ssl.create_default_context, cafile=cafile)
        except (OSError, ssl.SSLError) as err:
            raise TransportError(f"failed to load the CA bundle '{cafile}': {err}") from None
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout), trust_env=False) as session,
            session.request(
                method, url, headers=dict(headers or {}), data=body, allow_redirects=False, proxy=proxy, ssl=ssl_context
            ) as answer,
        ):
            data = await read_body(answer)
            if data is None:
                raise TransportError(f"{method} {redact_url(url)}: {TOO_LARGE}")
            return Response(answer.status, {k.lower(): v for k, v in answer.headers.items()}, data)
    except TimeoutError:
        raise TransportError(f"{method} {redact_url(url)}: no answer within {timeout:g}s") from None
    except asyncio.CancelledError:
        raise
    except aiohttp.ClientError as err:
        raise TransportError(f"{method} {redact_url(url)}: {_reason(err)}") from None


async def read_body(answer: aiohttp.ClientResponse) -> bytes | None:
    """The whole body of ``answer``, or ``None`` (read no further) once it is larger than ``MAX_BODY``:
    no key service or credential endpoint answers that much, and a runaway one must not fill memory."""
    data = bytearray()
    async for chunk in answer.content.iter_any():
        data += chunk
        if len(data) > MAX_BODY:
            return None
    return bytes(data)


def proxy_for(url: str, environ: Mapping[str, str]) -> str | None:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    names = ("HTTPS_PROXY", "https_proxy") if parts.scheme == "https" else ("HTTP_PROXY", "http_proxy")
    proxy = next((environ[n] for n in names if environ.get(n)), "")
    if not proxy or host == "localhost" or _is_loopback(host):
        return None
    for entry in (environ.get("NO_PROXY") or environ.get("no_proxy") or "").split(","):
        rule = entry.strip().lower()
        if not rule:
            continue
        if rule == "*" or _no_proxy_matches(rule, host, parts.port):
            return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _no_proxy_matches(rule: str, host: str, port: int | None) -> bool:
    try:
        return ipaddress.ip_address(host) in ipaddress.ip_network(rule, strict=False)
    except ValueError:
        pass
    name, _, rule_port = rule.rpartition(":") if rule.count(":") == 1 else (rule, "", "")
    if rule_port and port is not None and rule_port != str(port):
        return False
    name = name.lstrip(".")
    return host == name or host.endswith("." + name)


async def read_file(path: str, what: str) -> bytes:
    """A local file's bytes (at most 1 MiB), read off the event loop; errors name the file only."""

    def read() -> bytes:
        with open(path, "rb") as stream:
            return stream.read(MAX_BODY)

    try:
        return await asyncio.to_thread(read)
    except OSError as err:
        raise TransportError(f"failed to read {what} '{path}': {err.strerror}") from None


async def read_token_file(path: str, what: str) -> str:
    """A token file's text, stripped (a projected ServiceAccount token, a federated token, …)."""
    try:
        return (await read_file(path, what)).decode("utf-8").strip()
    except UnicodeDecodeError:
        raise TransportError(f"failed to read {what} '{path}': not UTF-8") from None


def _reason(err: aiohttp.ClientError) -> str:
    if isinstance(err, aiohttp.ClientConnectorError):
        return f"cannot connect: {err.os_error.strerror or err.os_error}"
    return type(err).__name__
