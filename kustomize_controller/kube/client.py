"""``KubeClient``: a small generic async Kubernetes client on aiohttp (objects are plain dicts).

The verbs live in one module each, as fluxcd/pkg ``ssa`` splits its manager: ``read.py`` (``get``,
``list``, ``list_page``), ``write.py`` (``create``, ``update``, ``patch``, ``apply``, ``delete``),
``watch.py`` (``watch``), all on the plumbing of ``request.py``; this module composes them and owns the
client's life (connection pool, derived clients, throttling).

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

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from kustomize_controller.kube.clientconfig import ClientConfig, NoAuth, StaticToken
from kustomize_controller.kube.discovery import ResourceInfo, RestMapper
from kustomize_controller.kube.errors import ApiError
from kustomize_controller.kube.metrics import RestClientMetrics
from kustomize_controller.kube.ratelimit import MonotonicClock, SystemClock, Throttling, TokenBucket
from kustomize_controller.kube.read import DEFAULT_PAGE_SIZE, ReadVerbs, to_partial_metadata
from kustomize_controller.kube.request import MAX_RETRY_AFTER_RETRIES, MAX_RETRY_AFTER_SECONDS, USER_AGENT
from kustomize_controller.kube.transport import AiohttpTransport, Timeout, Transport
from kustomize_controller.kube.watch import WATCH_READ_MARGIN, WatchEvent, WatchVerb
from kustomize_controller.kube.write import PATCH_CONTENT_TYPES, PatchType, WriteVerbs, object_identity


class KubeClient(ReadVerbs, WriteVerbs, WatchVerb):
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


__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_RETRY_AFTER_RETRIES",
    "MAX_RETRY_AFTER_SECONDS",
    "PATCH_CONTENT_TYPES",
    "USER_AGENT",
    "WATCH_READ_MARGIN",
    "ApiError",
    "KubeClient",
    "PatchType",
    "ResourceInfo",
    "WatchEvent",
    "object_identity",
    "to_partial_metadata",
]
