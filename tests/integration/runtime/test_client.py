"""The kube client against the test cluster: CRUD, SSA, subresources, paging, discovery refresh."""

import pytest

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.discovery import NoKindMatchError
from kustomize_controller.kube.errors import AlreadyExistsError, ConflictError, NotFoundError
from tests.integration.runtime.helpers import configmap, eventually, make_client

pytestmark = pytest.mark.integration


async def test_crud_round_trip(cluster) -> None:
    ns = cluster.namespace
    async with await make_client(cluster) as client:
        created = await client.create(configmap("a", ns, k="v"))
        assert created["metadata"]["resourceVersion"]
        with pytest.raises(AlreadyExistsError):
            await client.create(configmap("a", ns))
        got = await client.get("v1", "ConfigMap", "a", ns)
        got["data"]["k2"] = "v2"
        updated = await client.update(got)
        assert updated["data"] == {"k": "v", "k2": "v2"}
        with pytest.raises(ConflictError):
            await client.update(got)  # stale resourceVersion
        patched = await client.patch("v1", "ConfigMap", "a", ns, {"data": {"k": "patched"}}, patch_type="merge")
        assert patched["data"]["k"] == "patched"
        await client.delete("v1", "ConfigMap", "a", ns, propagation_policy="Background")
        with pytest.raises(NotFoundError) as err:
            await client.get("v1", "ConfigMap", "a", ns)
        assert str(err.value).startswith(f"ConfigMap/{ns}/a: ")


async def test_server_side_apply_and_dry_run(cluster) -> None:
    ns = cluster.namespace
    async with await make_client(cluster) as client:
        dry = await client.apply(configmap("ssa", ns, a="1"), field_manager="test", dry_run=True)
        assert dry["data"] == {"a": "1"}
        with pytest.raises(NotFoundError):
            await client.get("v1", "ConfigMap", "ssa", ns)
        applied = await client.apply(configmap("ssa", ns, a="1"), field_manager="test")
        assert applied["data"] == {"a": "1"}
        record = cluster.server.requests.select(verb="patch", resource="configmaps")[-1] if cluster.server else None
        if record is not None:
            assert record.content_type.startswith("application/apply-patch+yaml")
            assert record.field_manager == "test"


async def test_list_pages_through_everything(cluster) -> None:
    ns = cluster.namespace
    async with await make_client(cluster) as client:
        for i in range(12):
            await client.create(configmap(f"p{i:02d}", ns))
        page = await client.list_page("v1", "ConfigMap", ns, limit=5)
        assert len(page["items"]) == 5 and page["metadata"].get("continue")
        names = sorted(o["metadata"]["name"] for o in await client.list("v1", "ConfigMap", ns))
        assert [n for n in names if n.startswith("p")] == [f"p{i:02d}" for i in range(12)]


async def test_status_subresource_of_a_custom_resource(cluster) -> None:
    ns = cluster.namespace
    async with await make_client(cluster) as client:
        repo = {
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "GitRepository",
            "metadata": {"name": "repo", "namespace": ns},
            "spec": {"url": "https://example.com/repo", "interval": "1m"},
        }
        await client.create(repo)
        status = {"status": {"observedGeneration": 1}}
        await client.patch(
            "source.toolkit.fluxcd.io/v1", "GitRepository", "repo", ns, status, patch_type="merge", subresource="status"
        )
        got = await client.get("source.toolkit.fluxcd.io/v1", "GitRepository", "repo", ns)
        assert got["status"]["observedGeneration"] == 1


async def test_a_crd_installed_later_becomes_usable_without_restart(cluster) -> None:
    ns = cluster.namespace
    group = f"{ns}.demo.example.com"  # cluster-scoped: a name of its own, deleted afterwards
    async with await make_client(cluster) as client:
        with pytest.raises(NoKindMatchError):
            await client.list(f"{group}/v1", "Widget", ns)
        crd = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{group}"},
            "spec": {
                "group": group,
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                    }
                ],
            },
        }
        await client.apply(crd, field_manager="test")
        try:
            await _use_widget(client, group, ns)
        finally:
            await client.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", f"widgets.{group}")


async def _use_widget(client: KubeClient, group: str, ns: str) -> None:
    async def usable() -> bool:
        try:
            await client.list(f"{group}/v1", "Widget", ns)
        except NoKindMatchError:
            return False
        return True

    await eventually(usable, what="Widget served")
    await client.create({"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": ns}})
    assert (await client.get(f"{group}/v1", "Widget", "w", ns))["metadata"]["name"] == "w"


async def test_impersonation_is_sent(cluster) -> None:
    server = cluster.require_server()
    async with await make_client(cluster) as client:
        sa = client.impersonate("system:serviceaccount:default:nobody")
        await sa.list("v1", "ConfigMap", cluster.namespace)
        await client.list("v1", "ConfigMap", cluster.namespace)
        users = [r.user for r in server.requests.select(verb="list", resource="configmaps")]
        assert users[-2:] == ["system:serviceaccount:default:nobody", "kubernetes-admin"]


async def test_every_request_is_bounded_by_a_timeout(cluster) -> None:
    from kustomize_controller.kube.errors import TransportError

    server = cluster.require_server()
    async with await make_client(cluster, request_timeout=0.5) as client:
        await client.list("v1", "ConfigMap", cluster.namespace)  # discovery done before the fault
        server.faults.delay(3.0, method="GET", path=f"/namespaces/{cluster.namespace}/configmaps$", count=1)
        with pytest.raises(TransportError, match="timed out"):
            await client.list("v1", "ConfigMap", cluster.namespace)
        # a watch that goes silent is ended by the inactivity guard instead of hanging
        with pytest.raises(TransportError, match="no data"):
            async for _ in client.watch(
                "v1", "ConfigMap", cluster.namespace, resource_version="0", timeout_seconds=60, inactivity_timeout=0.5
            ):
                pass


async def test_connection_refused_is_a_transport_error_and_counted() -> None:
    import socket

    from prometheus_client import CollectorRegistry

    from kustomize_controller.kube.client import KubeClient
    from kustomize_controller.kube.errors import TransportError, is_transient
    from kustomize_controller.kube.metrics import RestClientMetrics

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    registry = CollectorRegistry()
    async with KubeClient.for_server(f"http://127.0.0.1:{port}", metrics=RestClientMetrics(registry=registry)) as c:
        with pytest.raises(TransportError) as err:
            await c.request_json("GET", "/version")
    assert is_transient(err.value)
    labels = {"code": "<error>", "method": "GET", "host": f"127.0.0.1:{port}"}
    assert registry.get_sample_value("rest_client_requests_total", labels) == 1


async def test_large_responses_through_the_small_tls_read_buffer(cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio.sslproto

    from kustomize_controller.kube.transport import TLS_READ_BUFFER, limit_tls_read_buffer

    monkeypatch.setattr(asyncio.sslproto.SSLProtocol, "max_size", asyncio.sslproto.SSLProtocol.max_size)
    limit_tls_read_buffer()  # as the controller's entry point does; restored by monkeypatch afterwards
    assert asyncio.sslproto.SSLProtocol.max_size == TLS_READ_BUFFER
    ns = cluster.namespace
    big = "".join(chr(ord("a") + i % 26) for i in range(900_000))  # ~55 TLS records in one response
    async with await make_client(cluster) as client:
        for i in range(3):
            await client.create(configmap(f"big-{i}", ns, blob=big[i:] + big[:i]))
        got = await client.get("v1", "ConfigMap", "big-1", ns)
        assert got["data"]["blob"] == big[1:] + big[:1]
        listed = await client.list("v1", "ConfigMap", ns)
        blobs = {o["metadata"]["name"]: o["data"]["blob"] for o in listed if o["metadata"]["name"].startswith("big-")}
        assert blobs == {f"big-{i}": big[i:] + big[:i] for i in range(3)}
