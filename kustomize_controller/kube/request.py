"""The plumbing under every ``KubeClient`` verb: one request, from rate-limit token to decoded answer.

Contract (``RequestBase``, the part of ``KubeClient`` the verb modules build on):
- ``_send`` takes a token of the shared bucket, sends the request with the client's headers
  (authorization, impersonation, user agent) and a timeout, and returns the open response. A 401
  makes the client refresh its credentials once and send again; a 429 or 5xx carrying
  ``Retry-After`` is sent again after that delay (at most ``MAX_RETRY_AFTER_SECONDS`` each time, at most
  ``MAX_RETRY_AFTER_RETRIES`` times, within the derived client's budget) and counted as a retry.
- Every request is counted once by verb and resource, and every answer by code.
- ``_request_json`` decodes the answer; a non-2xx raises the matching ``ApiError`` carrying the
  object identity (``answer_error``: ``waited_out`` when the server named a ``Retry-After``).
- ``_info``/``_namespace_for`` resolve a kind to its path through the REST mapper.

Not promised: other retries (callers own their retry policy: ``errors.is_transient``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import kustomize_controller
from kustomize_controller.kube.clientconfig import ClientConfig
from kustomize_controller.kube.discovery import ResourceInfo, RestMapper
from kustomize_controller.kube.errors import ApiError, TransportError, api_error_from_status
from kustomize_controller.kube.metrics import RestClientMetrics
from kustomize_controller.kube.ratelimit import MonotonicClock, TokenBucket
from kustomize_controller.kube.transport import HttpRequest, Timeout, Transport

USER_AGENT = f"kustomize-controller/{kustomize_controller.__version__}"
MAX_RETRY_AFTER_RETRIES = 10  # client-go's rest.Request maxRetries
MAX_RETRY_AFTER_SECONDS = 10.0


class RequestBase:
    """Sending, counting and decoding; ``KubeClient.__init__`` sets every attribute declared here."""

    config: ClientConfig
    user_agent: str
    mapper: RestMapper
    _host: str
    _default_limits: Timeout
    _clock: MonotonicClock
    _transport: Transport
    _bucket: TokenBucket
    _metrics: RestClientMetrics
    _impersonate: tuple[str, tuple[str, ...]] | None
    _retry_budget: float | None

    async def _headers(self, *, accept: str, content_type: str | None) -> list[tuple[str, str]]:
        headers = [("Accept", accept), ("User-Agent", self.user_agent)]
        if content_type:
            headers.append(("Content-Type", content_type))
        auth = await self.config.auth.authorization()
        if auth:
            headers.append(("Authorization", auth))
        if self._impersonate:
            user, groups = self._impersonate
            headers.append(("Impersonate-User", user))
            headers.extend(("Impersonate-Group", g) for g in groups)
        return headers

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: Sequence[tuple[str, str]] = (),
        body: bytes | None = None,
        content_type: str | None = None,
        accept: str = "application/json",
        limits: Timeout | None = None,
        stream: bool = False,
    ) -> Any:
        """Send one request (after a rate-limit token) and return the open response on 2xx."""
        refreshed = False
        retries = 0
        started = self._clock.monotonic()
        self._count_request(method, path, params)
        while True:
            await self._bucket.wait()
            request = HttpRequest(
                method=method,
                url=self.config.server + path,
                params=list(params),
                headers=await self._headers(accept=accept, content_type=content_type),
                body=body,
                timeout=limits or self._default_limits,
                stream=stream,
            )
            try:
                resp = await self._transport.send(request)
            except TransportError:
                self._metrics.observe(code=None, method=method, host=self._host)
                raise
            self._metrics.observe(code=resp.status, method=method, host=self._host)
            if resp.status == 401 and not refreshed:
                refreshed = True
                if await self.config.auth.refresh():
                    await resp.close()
                    continue
            wait = _retry_after(resp)
            if wait is not None and retries < MAX_RETRY_AFTER_RETRIES and self._within_budget(started, wait):
                # the server did not act on the request (429 from API priority and fairness, or a
                # 5xx carrying Retry-After): client-go retries these after the delay it names
                retries += 1
                self._metrics.observe_retry(code=resp.status, method=method, host=self._host)
                await resp.close()
                await self._clock.sleep(wait)
                continue
            return resp

    def _within_budget(self, started: float, wait: float) -> bool:
        budget = self._retry_budget
        return budget is None or self._clock.monotonic() - started + wait <= budget

    def _count_request(self, method: str, path: str, params: Sequence[tuple[str, str]]) -> None:
        resource, name, subresource = _resource_of(path)
        watch = any(k == "watch" and v == "true" for k, v in params)
        verb = _VERBS.get(method, method.lower())
        if method == "GET":
            verb = "watch" if watch else ("get" if name or not resource else "list")
        elif method == "DELETE" and not name:
            verb = "deletecollection"
        dry_run = any(k == "dryRun" for k, _ in params)
        self._metrics.observe_request(verb=verb, resource=resource, subresource=subresource, dry_run=dry_run)

    async def _request_json(
        self,
        method: str,
        path: str,
        *,
        params: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str | None = None,
        accept: str = "application/json",
        ident: tuple[str | None, str | None, str | None] = (None, None, None),
    ) -> Any:
        raw = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        if raw is not None and content_type is None:
            content_type = "application/json"
        resp = await self._send(method, path, params=params, body=raw, content_type=content_type, accept=accept)
        try:
            data = await resp.read()
        finally:
            await resp.close()
        decoded = decode_body(data)
        if resp.status >= 300:
            kind, namespace, name = ident
            raise answer_error(resp, decoded, kind=kind, namespace=namespace, name=name)
        return decoded

    async def request_json(
        self, method: str, path: str, *, params: Sequence[tuple[str, str]] = (), body: Any = None
    ) -> Any:
        """A raw JSON call on an API path (``/version``, ``/apis``, ...); errors as for every call."""
        return await self._request_json(method, path, params=params, body=body)

    async def _fetch_discovery(self, path: str) -> Mapping[str, Any]:
        result = await self._request_json("GET", path)
        return result if isinstance(result, Mapping) else {}

    async def _info(self, api_version: str, kind: str) -> ResourceInfo:
        return await self.mapper.resolve(api_version, kind)

    def _namespace_for(self, info: ResourceInfo, namespace: str | None, *, required: bool, what: str) -> str | None:
        if not info.namespaced:
            return None
        if required and not namespace:
            raise ValueError(f"{info.kind}/{what}: a namespace is required for a namespaced kind")
        return namespace


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def _resource_of(path: str) -> tuple[str, str, str]:
    """``(plural.group, name, subresource)`` of an API path; ``("", "", "")`` for discovery and
    non-resource paths."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, rest = "", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        return "", "", ""
    if not rest:
        return "", "", ""
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
        rest = rest[2:]
    resource = rest[0] + (f".{group}" if group else "")
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    return resource, name, subresource


def answer_error(
    resp: Any, body: Any, *, kind: str | None, namespace: str | None, name: str | None = None
) -> ApiError:
    """The error for a non-2xx answer that ``_send`` returned: ``waited_out`` when it named a
    ``Retry-After`` (``_send`` waited those out as often as it retries)."""
    err = api_error_from_status(resp.status, body, kind=kind, namespace=namespace, name=name)
    err.waited_out = _retry_after(resp) is not None
    return err


def _retry_after(resp: Any) -> float | None:
    """Seconds to wait before retrying, for a 429/5xx answer that carries ``Retry-After``."""
    if resp.status != 429 and not 500 <= resp.status <= 504:
        return None
    value = resp.headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS)


def decode_body(data: bytes) -> Any:
    if not data:
        return {}
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return data
