"""The controller-wide token cache: freshness at 80% of the lifetime or max-duration, LRU eviction,
one fetch per key at a time, failures not cached, and the ``gotk_token_*`` series."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.runtime.tokencache import (
    InvolvedObject,
    TokenCache,
    TokenCacheMetrics,
    cache_key,
)


@dataclass(frozen=True)
class Tok:
    value: str
    expires_at: datetime


def fetcher(clock: FakeClock, lifetime: float, calls: list[str]) -> object:
    async def fetch() -> Tok:
        calls.append("fetch")
        return Tok(f"t{len(calls)}", clock.now() + timedelta(seconds=lifetime))

    return fetch


async def test_token_is_fresh_until_80_percent_of_its_lifetime() -> None:
    clock = FakeClock()
    cache: TokenCache[Tok] = TokenCache(max_size=10, clock=clock)
    calls: list[str] = []
    fetch = fetcher(clock, 1000, calls)
    first = await cache.get_or_set("k", fetch)  # type: ignore[arg-type]
    await clock.advance(799)
    assert await cache.get_or_set("k", fetch) is first  # type: ignore[arg-type]
    await clock.advance(1)
    assert (await cache.get_or_set("k", fetch)).value == "t2"  # type: ignore[arg-type]
    assert calls == ["fetch", "fetch"]


async def test_max_duration_caps_freshness_and_is_capped_at_one_hour() -> None:
    clock = FakeClock()
    calls: list[str] = []
    cache: TokenCache[Tok] = TokenCache(max_size=10, clock=clock, max_duration=timedelta(minutes=5))
    fetch = fetcher(clock, 86400, calls)
    await cache.get_or_set("k", fetch)  # type: ignore[arg-type]
    await clock.advance(299)
    await cache.get_or_set("k", fetch)  # type: ignore[arg-type]
    await clock.advance(1)
    await cache.get_or_set("k", fetch)  # type: ignore[arg-type]
    assert len(calls) == 2

    calls.clear()
    long: TokenCache[Tok] = TokenCache(max_size=10, clock=clock, max_duration=timedelta(hours=5))
    await long.get_or_set("k", fetch)  # type: ignore[arg-type]
    await clock.advance(3599)
    await long.get_or_set("k", fetch)  # type: ignore[arg-type]
    await clock.advance(1)
    await long.get_or_set("k", fetch)  # type: ignore[arg-type]
    assert len(calls) == 2


async def test_expired_token_is_never_fresh() -> None:
    clock = FakeClock()
    calls: list[str] = []
    cache: TokenCache[Tok] = TokenCache(max_size=10, clock=clock)
    fetch = fetcher(clock, -5, calls)
    await cache.get_or_set("k", fetch)  # type: ignore[arg-type]
    await cache.get_or_set("k", fetch)  # type: ignore[arg-type]
    assert len(calls) == 2


async def test_lru_eviction_and_metrics() -> None:
    clock = FakeClock()
    registry = CollectorRegistry()
    cache: TokenCache[Tok] = TokenCache(max_size=2, clock=clock, metrics=TokenCacheMetrics(registry))
    calls: list[str] = []
    fetch = fetcher(clock, 3600, calls)
    ks = InvolvedObject("Kustomization", "app", "apps", "decrypt_with_aws")
    await cache.get_or_set("a", fetch, involved=ks)  # type: ignore[arg-type]
    await cache.get_or_set("b", fetch, involved=ks)  # type: ignore[arg-type]
    await cache.get_or_set("a", fetch, involved=ks)  # type: ignore[arg-type]  # a is now the most recent
    await cache.get_or_set("c", fetch, involved=ks)  # type: ignore[arg-type]  # evicts b
    await cache.get_or_set("a", fetch, involved=ks)  # type: ignore[arg-type]
    await cache.get_or_set("b", fetch, involved=ks)  # type: ignore[arg-type]  # fetched again, evicts c
    assert len(calls) == 4
    assert len(cache) == 2

    def value(metric: str, **labels: str) -> float | None:
        return registry.get_sample_value(metric, labels)

    events = {"kind": "Kustomization", "name": "app", "namespace": "apps", "operation": "decrypt_with_aws"}
    assert value("gotk_token_cache_events_total", event_type="cache_hit", **events) == 2
    assert value("gotk_token_cache_events_total", event_type="cache_miss", **events) == 4
    assert value("gotk_token_cache_requests_total", status="success") == 6
    assert value("gotk_token_cached_items") == 2
    assert value("gotk_token_cache_evictions_total") == 2

    async def failing() -> Tok:
        raise RuntimeError("no token")

    with pytest.raises(RuntimeError):
        await cache.get_or_set("d", failing, involved=ks)
    assert value("gotk_token_cache_requests_total", status="failure") == 1
    assert value("gotk_token_cache_events_total", event_type="cache_miss", **events) == 5

    cache.delete_events_for(kind="Kustomization", name="app", namespace="apps")
    assert value("gotk_token_cache_events_total", event_type="cache_miss", **events) is None
    assert value("gotk_token_cache_events_total", event_type="cache_hit", **events) is None


async def test_failures_are_not_cached_and_concurrent_calls_share_one_fetch() -> None:
    clock = FakeClock()
    cache: TokenCache[Tok] = TokenCache(max_size=10, clock=clock)
    attempts = 0
    release = asyncio.Event()

    async def slow() -> Tok:
        nonlocal attempts
        attempts += 1
        await release.wait()
        if attempts == 1:
            raise RuntimeError("first fails")
        return Tok("ok", clock.now() + timedelta(hours=1))

    waiters = [asyncio.ensure_future(cache.get_or_set("k", slow)) for _ in range(3)]
    await asyncio.sleep(0)
    release.set()
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert attempts == 1
    assert all(isinstance(r, RuntimeError) for r in results)
    assert (await cache.get_or_set("k", slow)).value == "ok"
    assert attempts == 2


def test_cache_key_is_upstreams_digest() -> None:
    import hashlib

    assert cache_key("provider=aws", "stsRegion=eu-west-1") == hashlib.sha256(
        b"provider=aws\nstsRegion=eu-west-1").hexdigest()
    with pytest.raises(ValueError):
        TokenCache(max_size=0, clock=FakeClock())


async def test_a_stale_token_whose_refresh_fails_is_dropped() -> None:
    clock = FakeClock()
    registry = CollectorRegistry()
    cache: TokenCache[Tok] = TokenCache(max_size=10, clock=clock, metrics=TokenCacheMetrics(registry))
    calls: list[str] = []
    await cache.get_or_set("k", fetcher(clock, 100, calls))  # type: ignore[arg-type]
    await clock.advance(90)

    async def failing() -> Tok:
        raise RuntimeError("STS is down")

    with pytest.raises(RuntimeError):
        await cache.get_or_set("k", failing)
    assert len(cache) == 0
    assert registry.get_sample_value("gotk_token_cached_items") == 0
