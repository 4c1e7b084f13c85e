"""Priority and fairness against a real HTTP server: detection, and 429 + Retry-After under load."""

import asyncio

import pytest

from kustomize_controller.api.kustomization import parse_kustomization
from kustomize_controller.kube.client import MAX_RETRY_AFTER_RETRIES
from kustomize_controller.kube.errors import TooManyRequestsError
from kustomize_controller.kube.flowcontrol import configure_throttling
from kustomize_controller.reconcile.status import StatusPatcher
from kustomize_controller.runtime.clock import RealClock
from tests.integration.runtime.helpers import configmap, make_client

pytestmark = pytest.mark.integration


async def test_a_server_with_priority_and_fairness_gets_no_client_side_limiter(cluster) -> None:
    # every kube-apiserver since 1.20 sends the flow-control headers; so does the embedded one by default
    async with await make_client(cluster, qps=5, burst=10) as client:
        throttling = await configure_throttling(client, qps=5, burst=10)
        assert throttling.mode == "priority-and-fairness"
        assert not client.rate_limited


async def test_without_the_headers_the_flags_apply(cluster) -> None:
    server = cluster.require_server()
    server.options.flow_control_headers = False
    async with await make_client(cluster, qps=5, burst=10) as client:
        throttling = await configure_throttling(client, qps=5, burst=10)
        assert (throttling.mode, throttling.qps, throttling.burst) == ("client-side", 5, 10)
        assert client.rate_limited


async def test_shed_requests_are_waited_out_and_counted(cluster) -> None:
    server = cluster.require_server()
    ns = cluster.namespace
    async with await make_client(cluster, qps=-1, burst=-1) as client:
        await client.get("v1", "Namespace", ns)  # discovery before the storm
        server.options.throttle_share = 0.3
        server.options.throttle_retry_after = 0
        try:
            created = await asyncio.gather(*(client.create(configmap(f"c{i}", ns, k=str(i))) for i in range(40)))
            assert len(created) == 40
            listed = await client.list("v1", "ConfigMap", ns)
        finally:
            server.options.throttle_share = 0.0
        assert {f"c{i}" for i in range(40)} <= {o["metadata"]["name"] for o in listed}
        retries = sum(
            s.value for m in client.rest_metrics.retries_total.collect() for s in m.samples
            if s.name.endswith("_total") and s.labels["code"] == "429"
        )
        shed = [r for r in server.requests if r.status == 429]
        assert retries == len(shed) > 0


async def test_a_status_write_under_lasting_shedding_is_retried_by_the_client_only(cluster) -> None:
    """The client sends a 429 again after each Retry-After, 10 times; the status patcher must not retry
    that whole sequence again (5 × 11 = 55 requests for one status write under sustained 429)."""
    server = cluster.require_server()  # fault injection
    ns = cluster.namespace
    ks = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
          "metadata": {"name": "app", "namespace": ns},
          "spec": {"interval": "5m", "prune": True, "sourceRef": {"kind": "GitRepository", "name": "r"}}}
    async with await make_client(cluster, qps=-1, burst=-1) as client:
        created = await client.create(ks)
        server.faults.fail(method="PATCH", path=r"/kustomizations/app/status$", status=429, count=None,
                           details={"retryAfterSeconds": 0})  # Retry-After: 0 keeps the test quick
        patcher = StatusPatcher(client=client, obj=created, clock=RealClock(), backoff=0.0)
        subject = parse_kustomization(created)
        subject.status.last_attempted_revision = "r"
        with pytest.raises(TooManyRequestsError):
            await patcher.patch(subject)
    sent = [r for r in server.requests if r.method == "PATCH" and r.path.endswith("/kustomizations/app/status")]
    assert len(sent) == 1 + MAX_RETRY_AFTER_RETRIES
    assert all(r.status == 429 for r in sent)
