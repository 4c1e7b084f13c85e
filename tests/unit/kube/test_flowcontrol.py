"""Priority-and-fairness detection: the flow-control headers decide whether the client throttles itself."""

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import TransportError
from kustomize_controller.kube.flowcontrol import (
    FLOW_SCHEMA_UID_HEADER,
    PRIORITY_LEVEL_UID_HEADER,
    PROBE_TIMEOUT,
    ThrottlingCache,
    configure_throttling,
    decide,
)
from kustomize_controller.kube.metrics import RestClientMetrics
from kustomize_controller.kube.transport import HttpRequest, MockResponse, MockTransport
from kustomize_controller.runtime.clock import FakeClock


def _server(headers: dict[str, str], *, status: int = 200, fail: bool = False) -> MockTransport:
    def handler(req: HttpRequest) -> MockResponse:
        if fail:
            raise TransportError("connection refused")
        return MockResponse(status=status, body=b"ok", headers={"Content-Type": "text/plain", **headers})

    return MockTransport(handler)


def test_decision_table() -> None:
    assert decide(apf=True, qps=50, burst=300).mode == "priority-and-fairness"
    assert (decide(apf=True, qps=50, burst=300).qps, decide(apf=True, qps=50, burst=300).burst) == (-1, -1)
    flags = decide(apf=False, qps=50, burst=300)
    assert (flags.mode, flags.qps, flags.burst) == ("client-side", 50, 300)
    assert decide(apf=False, qps=-1, burst=-1).mode == "none"


async def test_either_header_turns_the_limiter_off() -> None:
    for header in (FLOW_SCHEMA_UID_HEADER, PRIORITY_LEVEL_UID_HEADER):
        transport = _server({header: "uid"})
        client = KubeClient.for_server("http://fake", transport=transport, qps=50, burst=300)
        assert client.rate_limited
        throttling = await configure_throttling(client, qps=50, burst=300)
        assert throttling.mode == "priority-and-fairness"
        assert not client.rate_limited
        assert not client.impersonate("system:serviceaccount:a:b").rate_limited  # same server, same bucket
        assert [r.url for r in transport.requests] == ["http://fake/livez/ping"]


async def test_the_headers_as_go_spells_them_turn_the_limiter_off() -> None:
    """kube-apiserver's net/http canonicalises header names: X-Kubernetes-Pf-Flowschema-Uid."""
    for header in ("X-Kubernetes-Pf-Flowschema-Uid", "x-kubernetes-pf-prioritylevel-uid"):
        client = KubeClient.for_server("http://fake", transport=_server({header: "uid"}), qps=50, burst=300)
        throttling = await configure_throttling(client, qps=50, burst=300)
        assert throttling.mode == "priority-and-fairness"
        assert not client.rate_limited


async def test_no_header_keeps_the_flags_exactly() -> None:
    clock = FakeClock()
    client = KubeClient.for_server("http://fake", transport=_server({}), qps=2, burst=3, clock=clock)
    throttling = await configure_throttling(client, qps=2, burst=3)
    assert (throttling.mode, throttling.qps, throttling.burst) == ("client-side", 2, 3)
    assert client.rate_limited
    # the bucket starts full with the flags' burst, then refills at qps on the client's clock
    done = []

    async def probe_many() -> None:
        for _ in range(5):
            await client.probe("/livez/ping", request_timeout=1)
            done.append(clock.monotonic())

    task = asyncio.create_task(probe_many())
    for _ in range(4):
        await asyncio.sleep(0)
    await clock.advance(0.5)
    await clock.advance(0.5)
    await task
    assert done[:3] == [done[0]] * 3 and done[3] > done[0]


async def test_a_refused_ping_still_reports_the_headers_and_no_answer_falls_back() -> None:
    client = KubeClient.for_server("http://fake", transport=_server({FLOW_SCHEMA_UID_HEADER: "x"}, status=403))
    assert (await configure_throttling(client, qps=50, burst=300)).mode == "priority-and-fairness"
    client = KubeClient.for_server("http://fake", transport=_server({}, fail=True))
    throttling = await configure_throttling(client, qps=50, burst=300)
    assert throttling.mode == "client-side" and "connection refused" in throttling.probe_error


async def test_the_choice_is_exported() -> None:
    registry = CollectorRegistry()
    metrics = RestClientMetrics(registry=registry)
    client = KubeClient.for_server("http://fake", transport=_server({FLOW_SCHEMA_UID_HEADER: "x"}), metrics=metrics)
    await configure_throttling(client, qps=50, burst=300)
    value = registry.get_sample_value
    labels = {"host": "fake"}
    assert value("kustomize_controller_kube_client_throttling", {**labels, "mode": "priority-and-fairness"}) == 1
    assert value("kustomize_controller_kube_client_throttling", {**labels, "mode": "client-side"}) == 0


async def test_cache_probes_each_server_once_per_ttl() -> None:
    clock = FakeClock()
    cache = ThrottlingCache(qps=50, burst=300, ttl=60, clock=clock)
    transport = _server({FLOW_SCHEMA_UID_HEADER: "x"})
    for _ in range(3):
        client = KubeClient.for_server("http://remote", transport=transport)
        throttling, _probed = await cache.configure(client)
        assert throttling.mode == "priority-and-fairness" and not client.rate_limited
    assert len(transport.requests) == 1
    await clock.advance(61)
    await cache.configure(KubeClient.for_server("http://remote", transport=transport))
    assert len(transport.requests) == 2
    # another server is probed for itself
    plain = _server({})
    throttling, probed = await cache.configure(KubeClient.for_server("http://other", transport=plain))
    assert probed and throttling.mode == "client-side" and len(plain.requests) == 1


async def test_an_unanswered_probe_is_remembered_briefly_with_the_flags() -> None:
    """A remote server that is down costs one probe per ``unanswered_ttl``, not one per reconcile."""
    clock = FakeClock()
    cache = ThrottlingCache(qps=5, burst=10, ttl=600, unanswered_ttl=30, clock=clock)
    failing = _server({}, fail=True)
    outcomes = []
    for _ in range(3):
        client = KubeClient.for_server("http://down", transport=failing, qps=5, burst=10)
        throttling, probed = await cache.configure(client)
        outcomes.append(probed)
        assert (throttling.mode, throttling.qps, throttling.burst) == ("client-side", 5, 10)
        assert "connection refused" in throttling.probe_error and client.rate_limited
        await clock.advance(10)
    assert outcomes == [True, False, False]
    assert len(failing.requests) == 1
    # 30 s after the unanswered probe it is asked again, and an answer replaces the guess for the long ttl
    back = _server({FLOW_SCHEMA_UID_HEADER: "x"})
    throttling, probed = await cache.configure(KubeClient.for_server("http://down", transport=back))
    assert probed and throttling.mode == "priority-and-fairness" and len(back.requests) == 1
    await clock.advance(300)
    throttling, probed = await cache.configure(KubeClient.for_server("http://down", transport=back))
    assert not probed and throttling.mode == "priority-and-fairness" and len(back.requests) == 1


async def test_the_flags_of_the_cache_decide_never_a_clients_own() -> None:
    cache = ThrottlingCache(qps=-1, burst=-1, clock=FakeClock())
    client = KubeClient.for_server("http://plain", transport=_server({}), qps=7, burst=8)
    throttling, _ = await cache.configure(client)
    assert throttling.mode == "none" and not client.rate_limited


async def test_concurrent_callers_share_one_probe() -> None:
    cache = ThrottlingCache(qps=50, burst=300, clock=FakeClock())
    release = asyncio.Event()

    async def slow(req: HttpRequest) -> MockResponse:
        await release.wait()
        return MockResponse(status=200, body=b"ok", headers={FLOW_SCHEMA_UID_HEADER: "x"})

    transport = MockTransport(slow)
    clients = [KubeClient.for_server("http://remote", transport=transport) for _ in range(4)]
    tasks = [asyncio.create_task(cache.configure(c)) for c in clients]
    for _ in range(5):
        await asyncio.sleep(0)
    release.set()
    results = await asyncio.gather(*tasks)
    assert len(transport.requests) == 1
    assert sorted(probed for _, probed in results) == [False, False, False, True]
    assert all(not c.rate_limited for c in clients)


async def test_a_cancelled_probe_leaves_the_next_caller_to_probe() -> None:
    cache = ThrottlingCache(qps=50, burst=300, clock=FakeClock())
    never = asyncio.Event()

    async def hang(req: HttpRequest) -> MockResponse:
        await never.wait()
        raise AssertionError("unreachable")

    task = asyncio.create_task(cache.configure(KubeClient.for_server("http://remote", transport=MockTransport(hang))))
    for _ in range(3):
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    answering = _server({FLOW_SCHEMA_UID_HEADER: "x"})
    throttling, probed = await cache.configure(KubeClient.for_server("http://remote", transport=answering))
    assert probed and throttling.mode == "priority-and-fairness"


async def test_the_probe_times_out_sooner_than_ordinary_requests() -> None:
    """A server that does not answer (a remote cluster that is down) costs less on the probe than on a
    request: both the whole probe and its connection attempt are bounded tighter."""
    transport = _server({})
    client = KubeClient.for_server("http://fake", transport=transport, request_timeout=30)
    await configure_throttling(client, qps=50, burst=300)
    await client.request_json("GET", "/version")
    probe, ordinary = (r.timeout for r in transport.requests)
    assert probe.total == PROBE_TIMEOUT
    assert probe.total is not None and ordinary.total is not None and probe.total < ordinary.total
    assert probe.connect is not None and ordinary.connect is not None and probe.connect < ordinary.connect
