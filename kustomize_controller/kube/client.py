"""``KubeClient``: a small generic async Kubernetes client on aiohttp (objects are plain dicts).

Contract:
- Every request has a timeout (``request_timeout``, default 30 s total; watches: connect 10 s and a
  read timeout of ``timeoutSeconds`` + 30 s, plus an inactivity guard on the stream).
- Every request waits for a token of the shared client-side bucket (``--kube-api-qps``/``-burst``)
  and is counted in ``rest_client_requests_total{code,method,host}``.
- A non-2xx answer raises the matching ``ApiError`` subclass (see ``kube.errors``) carrying the
  object identity of the request and the server's message; no answer raises ``TransportError``.
  A 401 makes the client refresh its credentials once (exec plugins, rotated tokens) and retry.
- ``list`` follows ``continue`` tokens until the last page; returned items carry ``apiVersion`` and
  ``kind`` (the server omits them in lists).
- ``watch`` yields ``WatchEvent`` dicts (``type``, ``object``) until the server ends the stream
  (``timeoutSeconds``) or the caller stops; an ``ERROR`` event is raised as its ``ApiError``
  (a compacted resourceVersion → ``GoneError``).
- ``impersonate(...)`` returns a derived client sharing the connection pool, the REST mapper, the
  rate limiter and the metrics, that adds ``Impersonate-User``/``Impersonate-Group`` headers.
  Only the root client closes the pool.

- An answer of 429 (or 5xx) carrying ``Retry-After`` means the server did not act on the request: it
  is sent again after that delay (at most 10 s each time, at most 10 times), as client-go does, and
  counted in ``rest_client_request_retries_total``. Only a 429 that persists through all of them
  reaches the caller.
- Every request is also counted by verb and resource (``kustomize_controller_kube_requests_total``).
- Throttling: the bucket starts with ``qps``/``burst``; ``set_throttling`` (the start-up priority and
  fairness probe, ``kube.flowcontrol``) reconfigures it for this client and every client derived from it;
  ``limits`` reads the bucket's ``(qps, burst)`` back.

Not promised: other retries (callers own their retry policy: ``errors.is_transient``), protobuf,
WatchList.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Literal, TypedDict
from urllib.parse import urlsplit

import kustomize_controller
from kustomize_controller.kube.clientconfig import ClientConfig, NoAuth, StaticToken
from kustomize_controller.kube.discovery import ResourceInfo, RestMapper
from kustomize_controller.kube.errors import ApiError, TransportError, api_error_from_status
from kustomize_controller.kube.metrics import RestClientMetrics
from kustomize_controller.kube.ratelimit import MonotonicClock, SystemClock, Throttling, TokenBucket
from kustomize_controller.kube.transport import AiohttpTransport, HttpRequest, Timeout, Transport

PatchType = Literal["merge", "json", "strategic", "apply"]

PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}

USER_AGENT = f"kustomize-controller/{kustomize_controller.__version__}"
DEFAULT_PAGE_SIZE = 500
WATCH_READ_MARGIN = 30.0
MAX_RETRY_AFTER_RETRIES = 10  # client-go's rest.Request maxRetries
MAX_RETRY_AFTER_SECONDS = 10.0
_METADATA_ACCEPT_LIST = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json;q=0.9"
_METADATA_ACCEPT_WATCH = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io,application/json;q=0.9"


class WatchEvent(TypedDict):
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    object: dict[str, Any]


def object_identity(obj: Mapping[str, Any]) -> tuple[str, str, str, str | None]:
    """``(apiVersion, kind, name, namespace)`` of an object dict; raises ``ValueError`` when absent."""
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not api_version or not kind or not name:
        raise ValueError(f"object needs apiVersion, kind and metadata.name, got {api_version!r}/{kind!r}/{name!r}")
    return str(api_version), str(kind), str(name), meta.get("namespace")


def to_partial_metadata(obj: Mapping[str, Any], *, api_version: str, kind: str) -> dict[str, Any]:
    """Reduce an object to ``apiVersion``, ``kind`` and ``metadata`` (PartialObjectMetadata shape,
    keeping the type of the original resource as controller-runtime's metadata informers do)."""
    return {"apiVersion": api_version, "kind": kind, "metadata": dict(obj.get("metadata") or {})}


class KubeClient:
    """Generic client for any resource the server serves; see the module docstring for the contract."""

    def __init__(
        self,
        *,
        config: ClientConfig,
        transport: Transport | None = None,
        qps: float = 50.0,
        burst: int = 300,
        metrics: RestClientMetrics | None = None,
        clock: MonotonicClock | None = None,
        request_timeout: float = 30.0,
        user_agent: str = USER_AGENT,
        _parent: KubeClient | None = None,
        _impersonate: tuple[str, tuple[str, ...]] | None = None,
        _retry_budget: float | None = None,
    ) -> None:
        self.config = config
        # with_timeout: Retry-After waits end once the request has taken this long in all
        self._retry_budget = _retry_budget
        self.default_namespace = config.namespace
        self.request_timeout = request_timeout
        self.user_agent = user_agent
        self._impersonate = _impersonate
        self._host = urlsplit(config.server).netloc
        self._default_limits = Timeout(total=request_timeout, connect=min(10.0, request_timeout))
        self._clock: MonotonicClock = clock or SystemClock()
        self._transport: Transport
        self._bucket: TokenBucket
        self._metrics: RestClientMetrics
        self.mapper: RestMapper
        if _parent is not None:
            self._transport = _parent._transport
            self._bucket = _parent._bucket
            self._clock = _parent._clock
            self._metrics = _parent._metrics
            self.mapper = _parent.mapper
            self._owns_transport = False
        else:
            self._transport = transport or AiohttpTransport(
                ssl_context=config.ssl_context(),
                proxy=config.proxy,
                server_hostname=config.tls_server_name,
            )
            self._owns_transport = True
            self._bucket = TokenBucket(qps=qps, burst=burst, clock=self._clock)
            self._metrics = metrics or RestClientMetrics()
            self.mapper = RestMapper(fetch=self._fetch_discovery)

    @classmethod
    def for_server(cls, url: str, *, token: str | None = None, **kwargs: Any) -> KubeClient:
        """A client for a plain URL (tests, the embedded API server)."""
        auth = StaticToken(token) if token else NoAuth()
        return cls(config=ClientConfig(server=url.rstrip("/"), auth=auth, verify_ssl=False), **kwargs)

    async def close(self) -> None:
        if self._owns_transport:
            await self._transport.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def impersonate(self, user: str, groups: Sequence[str] = ()) -> KubeClient:
        """A derived client acting as ``user`` (e.g. ``system:serviceaccount:ns:name``)."""
        return KubeClient(
            config=self.config,
            request_timeout=self.request_timeout,
            user_agent=self.user_agent,
            _parent=self,
            _impersonate=(user, tuple(groups)),
            _retry_budget=self._retry_budget,
        )

    def with_timeout(self, request_timeout: float) -> KubeClient:
        """A derived client whose ordinary requests time out after ``request_timeout`` seconds
        (leader election uses max(renewDeadline/2, 1 s)); its Retry-After waits are bounded too: a
        request whose next wait would take it past ``request_timeout`` gets the server's answer instead
        (as client-go's request context deadline does), so a lasting 429 costs a lease renewal at most
        about twice ``request_timeout`` (the waits, then the last attempt's own timeout)."""
        return KubeClient(
            config=self.config,
            request_timeout=request_timeout,
            user_agent=self.user_agent,
            _parent=self,
            _impersonate=self._impersonate,
            _retry_budget=request_timeout,
        )

    @property
    def rest_metrics(self) -> RestClientMetrics:
        """The ``rest_client_requests_total`` counter this client (and its derived clients) count into."""
        return self._metrics

    def set_throttling(self, throttling: Throttling) -> None:
        """Apply a throttling decision (``kube.flowcontrol``) to the bucket this client shares."""
        self._bucket.reconfigure(qps=throttling.qps, burst=throttling.burst)
        self._metrics.set_throttling(host=self._host, mode=throttling.mode)

    @property
    def rate_limited(self) -> bool:
        """Whether requests wait for a client-side token."""
        return not self._bucket.disabled

    @property
    def limits(self) -> tuple[float, int]:
        """The ``(qps, burst)`` of the bucket this client shares; ``(-1, -1)`` when it has none."""
        if self._bucket.disabled:
            return -1.0, -1
        return self._bucket.qps, self._bucket.burst

    async def probe(self, path: str, *, request_timeout: float) -> tuple[int, Mapping[str, str]]:
        """GET a non-resource path and return the status and headers of the answer (no error on
        non-2xx; ``TransportError`` when no answer came)."""
        limits = Timeout(total=request_timeout, connect=min(10.0, request_timeout))
        resp = await self._send("GET", path, accept="*/*", limits=limits)
        try:
            await resp.read()
        finally:
            await resp.close()
        return resp.status, dict(resp.headers)

    @property
    def impersonated_user(self) -> str | None:
        return self._impersonate[0] if self._impersonate else None

    # ------------------------------------------------------------------------------------ plumbing

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
        decoded = _decode(data)
        if resp.status >= 300:
            kind, namespace, name = ident
            raise _answer_error(resp, decoded, kind=kind, namespace=namespace, name=name)
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

    # ----------------------------------------------------------------------------------------- verbs

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        info = await self._info(api_version, kind)
        ns = self._namespace_for(info, namespace, required=True, what=name)
        result: dict[str, Any] = await self._request_json(
            "GET", info.path(namespace=ns, name=name), ident=(kind, ns, name)
        )
        return result

    async def list_page(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = DEFAULT_PAGE_SIZE,
        continue_token: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        metadata_only: bool = False,
    ) -> dict[str, Any]:
        """One page: the raw List object (``items``, ``metadata.resourceVersion``, ``metadata.continue``)."""
        info = await self._info(api_version, kind)
        ns = self._namespace_for(info, namespace, required=False, what="*")
        params: list[tuple[str, str]] = []
        if label_selector:
            params.append(("labelSelector", label_selector))
        if field_selector:
            params.append(("fieldSelector", field_selector))
        if limit:
            params.append(("limit", str(limit)))
        if continue_token:
            params.append(("continue", continue_token))
        if resource_version is not None:
            params.append(("resourceVersion", resource_version))
        if resource_version_match:
            params.append(("resourceVersionMatch", resource_version_match))
        accept = _METADATA_ACCEPT_LIST if metadata_only else "application/json"
        page: dict[str, Any] = await self._request_json(
            "GET", info.path(namespace=ns), params=params, accept=accept, ident=(kind, ns, None)
        )
        items = page.get("items") or []
        if metadata_only:
            page["items"] = [to_partial_metadata(i, api_version=api_version, kind=kind) for i in items]
        else:
            for item in items:
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
            page["items"] = items
        return page

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """Every object of a kind (following ``continue`` tokens)."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = await self.list_page(
                api_version,
                kind,
                namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                continue_token=token,
            )
            items.extend(page["items"])
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return items

    async def create(
        self, obj: Mapping[str, Any], *, dry_run: bool = False, field_manager: str | None = None
    ) -> dict[str, Any]:
        api_version, kind, name, namespace = object_identity(obj)
        info = await self._info(api_version, kind)
        ns = self._namespace_for(info, namespace, required=True, what=name)
        params = _write_params(dry_run=dry_run, field_manager=field_manager)
        result: dict[str, Any] = await self._request_json(
            "POST", info.path(namespace=ns), params=params, body=obj, ident=(kind, ns, name)
        )
        return result

    async def update(
        self, obj: Mapping[str, Any], *, dry_run: bool = False, subresource: str | None = None
    ) -> dict[str, Any]:
        """PUT the whole object (``metadata.resourceVersion`` makes it a compare-and-swap)."""
        api_version, kind, name, namespace = object_identity(obj)
        info = await self._info(api_version, kind)
        ns = self._namespace_for(info, namespace, required=True, what=name)
        result: dict[str, Any] = await self._request_json(
            "PUT",
            info.path(namespace=ns, name=name, subresource=subresource),
            params=_write_params(dry_run=dry_run),
            body=obj,
            ident=(kind, ns, name),
        )
        return result

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        body: Any,
        *,
        patch_type: PatchType,
        field_manager: str | None = None,
        force: bool | None = None,
        dry_run: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        content_type = PATCH_CONTENT_TYPES.get(patch_type)
        if content_type is None:
            raise ValueError(f"unknown patch type {patch_type!r}; one of {sorted(PATCH_CONTENT_TYPES)}")
        if patch_type == "apply" and not field_manager:
            raise ValueError(f"{kind}/{namespace or ''}/{name}: server-side apply needs a field manager")
        info = await self._info(api_version, kind)
        ns = self._namespace_for(info, namespace, required=True, what=name)
        params = _write_params(dry_run=dry_run, field_manager=field_manager)
        if force is not None and patch_type == "apply":
            params.append(("force", "true" if force else "false"))
        result: dict[str, Any] = await self._request_json(
            "PATCH",
            info.path(namespace=ns, name=name, subresource=subresource),
            params=params,
            body=body,
            content_type=content_type,
            ident=(kind, ns, name),
        )
        return result

    async def apply(
        self,
        obj: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        dry_run: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Server-side apply of ``obj`` (``application/apply-patch+yaml``; JSON is valid YAML)."""
        api_version, kind, name, namespace = object_identity(obj)
        return await self.patch(
            api_version,
            kind,
            name,
            namespace,
            obj,
            patch_type="apply",
            field_manager=field_manager,
            force=force,
            dry_run=dry_run,
            subresource=subresource,
        )

    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any] | None:
        """Delete one object. Returns the object when the server still has it (finalizers pending,
        or it echoes it back), ``None`` when it answers with a success ``Status``."""
        info = await self._info(api_version, kind)
        ns = self._namespace_for(info, namespace, required=True, what=name)
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if dry_run:
            options["dryRun"] = ["All"]
        result = await self._request_json(
            "DELETE", info.path(namespace=ns, name=name), body=options, ident=(kind, ns, name)
        )
        if not isinstance(result, dict) or result.get("kind") == "Status":
            return None
        return result

    async def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = True,
        metadata_only: bool = False,
        inactivity_timeout: float | None = None,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Stream watch events; see the module docstring. The stream is closed when the caller stops
        iterating (``aclose()`` or ``break`` inside ``async with contextlib.aclosing(...)``).

        ``inactivity_timeout`` (default ``timeoutSeconds`` + 30 s, or 330 s) ends a stream that
        delivers nothing for that long with ``TransportError`` — a guard against dead TCP streams
        that the socket read timeout might not catch.
        """
        info = await self._info(api_version, kind)
        ns = self._namespace_for(info, namespace, required=False, what="*")
        params: list[tuple[str, str]] = [("watch", "true")]
        if resource_version is not None:
            params.append(("resourceVersion", resource_version))
        if timeout_seconds is not None:
            params.append(("timeoutSeconds", str(int(timeout_seconds))))
        if allow_bookmarks:
            params.append(("allowWatchBookmarks", "true"))
        if label_selector:
            params.append(("labelSelector", label_selector))
        if field_selector:
            params.append(("fieldSelector", field_selector))
        read = float(timeout_seconds if timeout_seconds is not None else 300) + WATCH_READ_MARGIN
        guard = inactivity_timeout if inactivity_timeout is not None else read
        accept = _METADATA_ACCEPT_WATCH if metadata_only else "application/json"
        resp = await self._send(
            "GET",
            info.path(namespace=ns),
            params=params,
            accept=accept,
            limits=Timeout(total=None, connect=10.0, read=read),
            stream=True,
        )
        try:
            if resp.status >= 300:
                body = _decode(await resp.read())
                raise _answer_error(resp, body, kind=kind, namespace=ns)
            lines = resp.lines()
            while True:
                try:
                    async with asyncio.timeout(guard):
                        line = await anext(lines, None)
                except TimeoutError as err:
                    raise TransportError(
                        f"{kind} watch: no data for {guard:.0f}s, closing the stream",
                        method="GET",
                        url=info.path(namespace=ns),
                    ) from err
                if line is None:
                    return
                line = line.strip()
                if not line:
                    continue
                event = _decode(line)
                if not isinstance(event, dict) or "type" not in event:
                    raise TransportError(f"{kind} watch: undecodable event {line[:200]!r}")
                etype = str(event["type"])
                obj = event.get("object") or {}
                if etype == "ERROR":
                    code = int(obj.get("code") or 500) if isinstance(obj, dict) else 500
                    raise api_error_from_status(code, obj, kind=kind, namespace=ns)
                if metadata_only and etype != "BOOKMARK":
                    obj = to_partial_metadata(obj, api_version=api_version, kind=kind)
                elif isinstance(obj, dict):
                    obj.setdefault("apiVersion", api_version)
                    obj.setdefault("kind", kind)
                yield WatchEvent(type=etype, object=obj)
        finally:
            await resp.close()


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


def _answer_error(
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


def _write_params(*, dry_run: bool = False, field_manager: str | None = None) -> list[tuple[str, str]]:
    params: list[tuple[str, str]] = []
    if dry_run:
        params.append(("dryRun", "All"))
    if field_manager:
        params.append(("fieldManager", field_manager))
    return params


def _decode(data: bytes) -> Any:
    if not data:
        return {}
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return data


__all__ = [
    "PATCH_CONTENT_TYPES",
    "USER_AGENT",
    "ApiError",
    "KubeClient",
    "PatchType",
    "ResourceInfo",
    "WatchEvent",
    "object_identity",
    "to_partial_metadata",
]
