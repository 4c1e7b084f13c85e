"""The controller-wide cache of short-lived access tokens (fluxcd/pkg ``cache.TokenCache``).

Contract:
- An LRU of at most ``max_size`` tokens (``--token-cache-max-size``; the controller builds none
  when it is 0, so nothing is cached and no ``gotk_token_*`` series exist, as upstream).
- ``get_or_set(key, fetch, involved=…)`` returns the cached token for ``key`` while it is fresh,
  otherwise awaits ``fetch()`` and stores its result. A token is stale once 80% of its lifetime
  (``expires_at`` − now when it was stored; kubelet's rotation threshold) or ``max_duration``
  (``--token-cache-max-duration``, capped at one hour) has passed, whichever comes first. A token
  with no lifetime left is returned but never stays fresh. A failed fetch stores nothing and is
  not remembered: the next call fetches again.
- Concurrent calls for one key share one fetch (upstream serialises every fetch behind one lock;
  here other keys proceed meanwhile).
- Keys are opaque strings; callers pass a digest (``cache_key``), never a token or a secret.
- Time only through the injected clock (``monotonic`` for freshness, ``now`` for the lifetime).
- Metrics, named as upstream with the prefix ``gotk_token_``: ``gotk_token_cache_events_total
  {event_type=cache_hit|cache_miss, kind, name, namespace, operation}`` per call made on behalf
  of an object, ``gotk_token_cache_requests_total{status=success|failure}``,
  ``gotk_token_cached_items`` and ``gotk_token_cache_evictions_total``. ``delete_events_for``
  removes an object's event series when it is deleted.

Not promised: tokens survive a restart (they do not); a token is refreshed before it is needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Generic, Protocol, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge

from kustomize_controller.runtime.clock import Clock

TOKEN_MAX_DURATION = timedelta(hours=1)
EVENT_HIT = "cache_hit"
EVENT_MISS = "cache_miss"
# upstream kustomize-controller api/v1 metrics.go: every operation it records cache events for
OPERATIONS = ("fetch_kubeconfig", "decrypt_with_aws", "decrypt_with_azure", "decrypt_with_gcp", "decrypt_with_vault")


class Token(Protocol):
    @property
    def expires_at(self) -> datetime: ...


T = TypeVar("T", bound=Token)


@dataclass(frozen=True, slots=True)
class InvolvedObject:
    """The object a token is fetched for, and why (the cache event labels)."""

    kind: str
    name: str
    namespace: str
    operation: str


def cache_key(*parts: str) -> str:
    """Upstream's key: the sha256 of ``name=value`` parts joined by newlines."""
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


class TokenCacheMetrics:
    def __init__(self, registry: CollectorRegistry, prefix: str = "gotk_token_") -> None:
        self.events = Counter(
            f"{prefix}cache_events",
            "Total number of cache retrieval events for a Gitops Toolkit resource reconciliation.",
            ["event_type", "kind", "name", "namespace", "operation"],
            registry=registry,
        )
        self.items = Gauge(f"{prefix}cached_items", "Total number of items in the cache.", registry=registry)
        self.requests = Counter(
            f"{prefix}cache_requests",
            "Total number of cache requests partioned by success or failure.",  # sic, upstream's text
            ["status"],
            registry=registry,
        )
        self.evictions = Counter(f"{prefix}cache_evictions", "Total number of cache evictions.", registry=registry)


@dataclass(slots=True)
class _Entry(Generic[T]):
    token: T
    fresh_until: float  # clock.monotonic()


class TokenCache(Generic[T]):
    def __init__(
        self,
        *,
        max_size: int,
        clock: Clock,
        max_duration: timedelta = TOKEN_MAX_DURATION,
        metrics: TokenCacheMetrics | None = None,
    ) -> None:
        if max_size <= 0:
            raise ValueError("a token cache needs a positive size")
        self._max_size = max_size
        self._clock = clock
        self._max_duration = min(max_duration, TOKEN_MAX_DURATION).total_seconds()
        self._metrics = metrics
        self._entries: OrderedDict[str, _Entry[T]] = OrderedDict()
        self._fetching: dict[str, asyncio.Future[T]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    async def get_or_set(
        self, key: str, fetch: Callable[[], Awaitable[T]], *, involved: InvolvedObject | None = None
    ) -> T:
        hit = False
        try:
            entry = self._entries.get(key)
            if entry is not None and entry.fresh_until > self._clock.monotonic():
                self._entries.move_to_end(key)
                hit = True
                token = entry.token
            else:
                if entry is not None:  # stale: gone whether or not the refresh succeeds, as upstream
                    del self._entries[key]
                    if self._metrics is not None:
                        self._metrics.items.set(len(self._entries))
                token = await self._fetch_once(key, fetch)
        except BaseException:
            self._record(involved, hit=False, ok=False)
            raise
        self._record(involved, hit=hit, ok=True)
        return token

    async def _fetch_once(self, key: str, fetch: Callable[[], Awaitable[T]]) -> T:
        pending = self._fetching.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._fetching[key] = future
        try:
            token = await fetch()
        except BaseException as err:
            future.set_exception(err)
            future.exception()  # retrieved: a fetch nobody else waited for must not warn
            raise
        else:
            future.set_result(token)
            self._store(key, token)
            return token
        finally:
            del self._fetching[key]

    def _store(self, key: str, token: T) -> None:
        lifetime = (token.expires_at - self._clock.now()).total_seconds()
        fresh_for = min(max(lifetime, 0.0) * 0.8, self._max_duration)
        self._entries.pop(key, None)
        self._entries[key] = _Entry(token, self._clock.monotonic() + fresh_for)
        if len(self._entries) > self._max_size:
            self._entries.popitem(last=False)
            if self._metrics is not None:
                self._metrics.evictions.inc()
        if self._metrics is not None:
            self._metrics.items.set(len(self._entries))

    def _record(self, involved: InvolvedObject | None, *, hit: bool, ok: bool) -> None:
        if self._metrics is None:
            return
        self._metrics.requests.labels("success" if ok else "failure").inc()
        if involved is not None:
            event = EVENT_HIT if hit else EVENT_MISS
            self._metrics.events.labels(
                event, involved.kind, involved.name, involved.namespace, involved.operation
            ).inc()

    def delete_events_for(
        self, *, kind: str, name: str, namespace: str, operations: Iterable[str] = OPERATIONS
    ) -> None:
        if self._metrics is None:
            return
        for operation in operations:
            for event in (EVENT_HIT, EVENT_MISS):
                with contextlib.suppress(KeyError):
                    self._metrics.events.remove(event, kind, name, namespace, operation)
