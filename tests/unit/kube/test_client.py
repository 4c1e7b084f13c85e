import asyncio
import json
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kustomize_controller.kube.client import USER_AGENT, KubeClient
from kustomize_controller.kube.config import ClientConfig
from kustomize_controller.kube.discovery import NoKindMatchError
from kustomize_controller.kube.errors import (
    AlreadyExistsError,
    ConflictError,
    GoneError,
    NotFoundError,
    TransportError,
    UnauthorizedError,
)
from kustomize_controller.kube.metrics import RestClientMetrics
from kustomize_controller.kube.transport import HttpRequest, MockResponse, MockTransport
from tests.unit.runtime.fakeapi import FakeApi


def cm(name: str, ns: str = "ns", **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}


async def test_paths_for_namespaced_and_cluster_scoped_kinds() -> None:
    api = FakeApi()
    client = api.client()
    await client.create(cm("a"))
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
    await client.get("v1", "ConfigMap", "a", "ns")
    await client.get("v1", "Namespace", "ns", "ignored-for-cluster-scope")
    paths = [r.url for r in api.transport.requests if "namespaces" in r.url or "configmaps" in r.url]
    assert paths == [
        "http://fake/api/v1/namespaces/ns/configmaps",
        "http://fake/api/v1/namespaces",
        "http://fake/api/v1/namespaces/ns/configmaps/a",
        "http://fake/api/v1/namespaces/ns",
    ]


async def test_every_request_has_user_agent_auth_and_timeout() -> None:
    api = FakeApi()
    await api.client(request_timeout=7).create(cm("a"))
    for req in api.transport.requests:
        assert req.header("User-Agent") == USER_AGENT
        assert req.header("Authorization") == "Bearer t"
        assert req.timeout.total == 7


async def test_list_follows_continue_and_fills_type_meta() -> None:
    api = FakeApi()
    client = api.client()
    for i in range(7):
        await client.create(cm(f"c{i}"))
    page = await client.list_page("v1", "ConfigMap", "ns", limit=3)
    assert len(page["items"]) == 3 and page["metadata"]["continue"] == "3"
    items = await client.list("v1", "ConfigMap", "ns", label_selector="a=b")
    assert [i["metadata"]["name"] for i in items] == [f"c{i}" for i in range(7)]
    assert all(i["kind"] == "ConfigMap" and i["apiVersion"] == "v1" for i in items)
    lists = [r for r in api.transport.requests if r.method == "GET" and r.url.endswith("/configmaps")]
    assert lists[-1].query() == {"labelSelector": "a=b", "limit": "500"}


async def test_server_side_apply_request_shape() -> None:
    api = FakeApi()
    client = api.client()
    await client.create(cm("a"))
    await client.apply(cm("a", k="v"), field_manager="kustomize-controller", force=True, dry_run=True)
    req = api.writes("PATCH")[-1]
    assert req.header("Content-Type") == "application/apply-patch+yaml"
    assert req.params == [("dryRun", "All"), ("fieldManager", "kustomize-controller"), ("force", "true")]
    assert json.loads(req.body or b"")["data"] == {"k": "v"}


@pytest.mark.parametrize(
    ("patch_type", "content_type"),
    [
        ("merge", "application/merge-patch+json"),
        ("json", "application/json-patch+json"),
        ("strategic", "application/strategic-merge-patch+json"),
    ],
)
async def test_patch_content_types(patch_type: Any, content_type: str) -> None:
    api = FakeApi()
    client = api.client()
    await client.create(cm("a"))
    await client.patch("v1", "ConfigMap", "a", "ns", {"data": {}}, patch_type=patch_type, subresource="status")
    req = api.writes("PATCH")[-1]
    assert req.header("Content-Type") == content_type
    assert req.url.endswith("/configmaps/a/status")
    assert "force" not in req.query()


async def test_apply_without_field_manager_is_refused() -> None:
    client = FakeApi().client()
    with pytest.raises(ValueError, match="field manager"):
        await client.patch("v1", "ConfigMap", "a", "ns", {}, patch_type="apply")


async def test_delete_sends_propagation_policy_and_dry_run() -> None:
    api = FakeApi()
    client = api.client()
    await client.create(cm("a"))
    assert await client.delete("v1", "ConfigMap", "a", "ns", propagation_policy="Background", dry_run=True) is None
    body = json.loads(api.writes("DELETE")[-1].body or b"")
    assert body == {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background", "dryRun": ["All"]}


async def test_errors_carry_identity_and_server_message() -> None:
    api = FakeApi()
    client = api.client()
    with pytest.raises(NotFoundError) as nf:
        await client.get("v1", "ConfigMap", "missing", "ns")
    assert str(nf.value) == 'ConfigMap/ns/missing: configmaps "missing" not found'
    await client.create(cm("a"))
    with pytest.raises(AlreadyExistsError) as ae:
        await client.create(cm("a"))
    assert ae.value.kind == "ConfigMap" and ae.value.namespace == "ns" and ae.value.name == "a"
    stale = await client.get("v1", "ConfigMap", "a", "ns")
    await client.update(cm("a", x="1") | {"metadata": stale["metadata"]})
    with pytest.raises(ConflictError):
        await client.update(stale)


async def test_update_uses_put_and_status_subresource() -> None:
    api = FakeApi()
    client = api.client()
    obj = await client.create(cm("a"))
    await client.update(obj, subresource="status")
    assert api.writes("PUT")[-1].url.endswith("/namespaces/ns/configmaps/a/status")


async def test_namespace_required_for_namespaced_kinds() -> None:
    client = FakeApi().client()
    with pytest.raises(ValueError, match="ConfigMap/a: a namespace is required"):
        await client.get("v1", "ConfigMap", "a")


async def test_unknown_kind_refreshes_discovery_once_then_fails() -> None:
    api = FakeApi()
    client = api.client()
    with pytest.raises(NoKindMatchError, match=r'no matches for kind "Widget" in version "example\.com/v1"'):
        await client.get("example.com/v1", "Widget", "w", "ns")
    # the CRD gets installed: the next call rediscovers and works without a new client
    api.extra_resources["/apis/example.com/v1"] = [{"name": "widgets", "kind": "Widget", "namespaced": True}]
    with pytest.raises(NotFoundError):
        await client.get("example.com/v1", "Widget", "w", "ns")
    discovery = [r for r in api.transport.requests if r.url.endswith("/apis/example.com/v1")]
    assert len(discovery) == 2
    await client.list("example.com/v1", "Widget", "ns")
    assert len([r for r in api.transport.requests if r.url.endswith("/apis/example.com/v1")]) == 2


async def test_impersonated_client_adds_headers_and_shares_everything() -> None:
    api = FakeApi()
    root = api.client()
    sa = root.impersonate("system:serviceaccount:apps:deployer", groups=["system:serviceaccounts", "g2"])
    await sa.create(cm("a"))
    req = api.writes("POST")[-1]
    assert req.header("Impersonate-User") == "system:serviceaccount:apps:deployer"
    assert req.header_values("Impersonate-Group") == ["system:serviceaccounts", "g2"]
    assert sa.mapper is root.mapper
    await root.get("v1", "ConfigMap", "a", "ns")
    assert api.transport.requests[-1].header("Impersonate-User") is None


async def test_unauthorized_refreshes_credentials_once() -> None:
    class RotatingToken:
        def __init__(self) -> None:
            self.token = "old"

        async def authorization(self) -> str | None:
            return f"Bearer {self.token}"

        async def refresh(self) -> bool:
            self.token = "new"
            return True

    def handler(req: HttpRequest) -> MockResponse:
        if req.header("Authorization") != "Bearer new":
            return MockResponse(status=401, json_body={"kind": "Status", "reason": "Unauthorized", "message": "no"})
        return MockResponse(json_body={"kind": "APIResourceList", "resources": []})

    transport = MockTransport(handler)
    client = KubeClient(config=ClientConfig(server="http://x", auth=RotatingToken()), transport=transport)
    await client.request_json("GET", "/api/v1")
    assert [r.header("Authorization") for r in transport.requests] == ["Bearer old", "Bearer new"]

    stuck = KubeClient(config=ClientConfig(server="http://x"), transport=transport)
    with pytest.raises(UnauthorizedError):
        await stuck.request_json("GET", "/api/v1")


def _watch_handler(lines: list[bytes | BaseException | None]) -> MockTransport:
    api = FakeApi()

    def handler(req: HttpRequest) -> MockResponse:
        if req.query().get("watch") == "true":
            return MockResponse(stream_lines=lines)
        return api.handle(req)

    return MockTransport(handler)


async def test_watch_parses_events_and_request_shape() -> None:
    def ev(t, name, rv):
        return (
            json.dumps(
                {
                    "type": t,
                    "object": {
                        "metadata": {
                            "name": name,
                            "namespace": "ns",
                            "resourceVersion": rv,
                        }
                    },
                }
            ).encode()
            + b"\n"
        )

    transport = _watch_handler([ev("ADDED", "a", "5"), b"\n", ev("MODIFIED", "a", "6"), ev("DELETED", "a", "7")])
    client = KubeClient.for_server("http://fake", transport=transport)
    events = [e async for e in client.watch("v1", "ConfigMap", "ns", resource_version="4", timeout_seconds=300)]
    assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in events] == [
        ("ADDED", "5"),
        ("MODIFIED", "6"),
        ("DELETED", "7"),
    ]
    assert events[0]["object"]["kind"] == "ConfigMap"
    req = transport.requests[-1]
    assert req.query() == {
        "watch": "true",
        "resourceVersion": "4",
        "timeoutSeconds": "300",
        "allowWatchBookmarks": "true",
    }
    assert req.timeout.total is None and req.timeout.read == 330


async def test_watch_error_event_raises_gone() -> None:
    err = {
        "type": "ERROR",
        "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version: 1 (50)"},
    }
    transport = _watch_handler([json.dumps(err).encode() + b"\n"])
    client = KubeClient.for_server("http://fake", transport=transport)
    with pytest.raises(GoneError, match="too old resource version"):
        async for _ in client.watch("v1", "ConfigMap", "ns", resource_version="1"):
            pass


async def test_watch_inactivity_guard_closes_a_dead_stream() -> None:
    transport = _watch_handler([None])  # the stream hangs forever
    client = KubeClient.for_server("http://fake", transport=transport)
    with pytest.raises(TransportError, match="no data"):
        async for _ in client.watch("v1", "ConfigMap", "ns", inactivity_timeout=0.05):
            pass


async def test_metadata_only_strips_everything_but_metadata() -> None:
    api = FakeApi()
    client = api.client()
    await client.create(cm("a", secret="value"))
    page = await client.list_page("v1", "ConfigMap", "ns", metadata_only=True)
    assert page["items"][0] == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": page["items"][0]["metadata"]}
    assert "PartialObjectMetadataList" in (api.transport.requests[-1].header("Accept") or "")


async def test_rest_client_metric_counts_codes() -> None:
    api = FakeApi()
    registry = CollectorRegistry()
    client = api.client(metrics=RestClientMetrics(registry=registry))
    await client.create(cm("a"))
    with pytest.raises(NotFoundError):
        await client.get("v1", "ConfigMap", "nope", "ns")
    value = registry.get_sample_value
    assert value("rest_client_requests_total", {"code": "404", "method": "GET", "host": "fake"}) == 1
    assert value("rest_client_requests_total", {"code": "200", "method": "POST", "host": "fake"}) == 1


async def test_retry_after_is_honoured_a_bounded_number_of_times() -> None:
    from kustomize_controller.kube.errors import TooManyRequestsError
    from kustomize_controller.runtime.clock import FakeClock

    answers = [429, 503, 200]
    sent_at: list[float] = []
    clock = FakeClock()

    def handler(req: HttpRequest) -> MockResponse:
        if req.url.endswith("/api/v1"):
            return MockResponse(
                json_body={"resources": [{"name": "configmaps", "kind": "ConfigMap", "namespaced": True}]}
            )
        sent_at.append(clock.monotonic())
        code = answers.pop(0) if answers else 429
        if code == 200:
            return MockResponse(json_body=cm("a"))
        body = {"kind": "Status", "code": code, "reason": "TooManyRequests", "message": "slow down"}
        return MockResponse(status=code, json_body=body, headers={"Retry-After": "2"})

    transport = MockTransport(handler)
    client = KubeClient.for_server("http://fake", transport=transport, clock=clock)
    task = asyncio.create_task(client.get("v1", "ConfigMap", "a", "ns"))
    await asyncio.sleep(0)
    for _ in range(10):
        await clock.advance(1)
    assert (await task)["metadata"]["name"] == "a"
    assert sent_at == [1000, 1002, 1004]  # two waits of 2 s on the client's clock
    # after 10 retries (client-go's bound) the error surfaces
    task = asyncio.create_task(client.get("v1", "ConfigMap", "a", "ns"))
    for _ in range(30):
        await clock.advance(1)
    with pytest.raises(TooManyRequestsError):
        await task
    gets = [r for r in transport.requests if r.url.endswith("/configmaps/a")]
    assert len(gets) == 3 + 11
    retried = client.rest_metrics.retries_total.labels(code="429", verb="GET", host="fake")._value.get()
    assert retried == 1 + 10


async def test_retry_after_waits_end_at_the_derived_clients_timeout() -> None:
    """A lease renewal under a lasting 429 must not outlive its deadline (client-go's context)."""
    from kustomize_controller.kube.errors import TooManyRequestsError
    from kustomize_controller.runtime.clock import FakeClock

    clock = FakeClock()
    sent_at: list[float] = []

    def handler(req: HttpRequest) -> MockResponse:
        if req.url.endswith("/api/v1"):
            return MockResponse(
                json_body={"resources": [{"name": "configmaps", "kind": "ConfigMap", "namespaced": True}]}
            )
        sent_at.append(clock.monotonic())
        body = {"kind": "Status", "code": 429, "reason": "TooManyRequests", "message": "slow down"}
        return MockResponse(status=429, json_body=body, headers={"Retry-After": "3"})

    root = KubeClient.for_server("http://fake", transport=MockTransport(handler), clock=clock)
    bounded = root.with_timeout(7.0)
    task = asyncio.create_task(bounded.get("v1", "ConfigMap", "a", "ns"))
    for _ in range(20):
        await clock.advance(1)
    with pytest.raises(TooManyRequestsError):
        await task
    # waits of 3 s while they end within 7 s of the first attempt: at 0, 3 and 6 s
    assert [t - sent_at[0] for t in sent_at] == [0, 3, 6]
    # the root client keeps client-go's count of retries
    sent_at.clear()
    task = asyncio.create_task(root.get("v1", "ConfigMap", "a", "ns"))
    for _ in range(40):
        await clock.advance(1)
    with pytest.raises(TooManyRequestsError):
        await task
    assert len(sent_at) == 11


@pytest.mark.parametrize(("headers", "waited_out"), [({"Retry-After": "1"}, True), ({}, False)],
                         ids=["with-retry-after", "without"])
async def test_a_429_says_whether_the_client_waited_it_out(headers: dict[str, str], waited_out: bool) -> None:
    from kustomize_controller.kube.errors import TooManyRequestsError
    from kustomize_controller.runtime.clock import FakeClock

    clock = FakeClock()
    sent = 0

    def handler(req: HttpRequest) -> MockResponse:
        nonlocal sent
        if req.url.endswith("/api/v1"):
            return MockResponse(
                json_body={"resources": [{"name": "configmaps", "kind": "ConfigMap", "namespaced": True}]}
            )
        sent += 1
        body = {"kind": "Status", "code": 429, "reason": "TooManyRequests", "message": "slow down"}
        return MockResponse(status=429, json_body=body, headers=headers)

    client = KubeClient.for_server("http://fake", transport=MockTransport(handler), clock=clock)
    task = asyncio.create_task(client.get("v1", "ConfigMap", "a", "ns"))
    for _ in range(15):
        await clock.advance(1)
    with pytest.raises(TooManyRequestsError) as caught:
        await task
    assert caught.value.waited_out is waited_out
    assert sent == (11 if waited_out else 1)
