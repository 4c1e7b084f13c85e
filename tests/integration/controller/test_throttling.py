"""The controller's own client against an API server without priority and fairness (no flow-control
headers): the ``--kube-api-qps``/``--kube-api-burst`` bucket applies exactly as the flags say, ``-1``
turns it off, and the choice is exported. Needs the embedded server (a real kube-apiserver always sends
the headers), except the last test, which runs anywhere."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.integration.controller.conftest import ControllerEnv
from tests.integration.controller.test_metrics import scrape, values

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("qps", "burst", "mode", "limits"), [
    (7.0, 11, "client-side", (7.0, 11)),
    (-1.0, -1, "none", (-1.0, -1)),
], ids=["flags", "minus-one"])
async def test_without_flow_control_headers_the_flags_hold(
    env: ControllerEnv, qps: float, burst: int, mode: str, limits: tuple[float, int]
) -> None:
    server = env.server  # headers off: needs the embedded server
    server.options.flow_control_headers = False
    await env.start(kube_api_qps=qps, kube_api_burst=burst)
    samples = await scrape(env)
    assert env.manager is not None
    client = env.manager.client
    assert client.limits == limits
    assert client.rate_limited == (mode == "client-side")
    # impersonated clients (tenants) share the bucket and its limits
    assert client.impersonate("system:serviceaccount:a:b").limits == limits
    host = urlsplit(server.url).netloc
    chosen = {lbls["mode"]: value for lbls, value in samples["kustomize_controller_kube_client_throttling"]
              if lbls["host"] == host}
    assert chosen == {"priority-and-fairness": 0, "client-side": 1 if mode == "client-side" else 0,
                      "none": 1 if mode == "none" else 0}


async def test_with_flow_control_headers_the_limiter_is_off(env: ControllerEnv) -> None:
    # every kube-apiserver since 1.20 sends the headers, and so does the embedded one by default
    await env.start(kube_api_qps=7.0, kube_api_burst=11)
    samples = await scrape(env)
    assert env.manager is not None
    assert env.manager.client.limits == (-1.0, -1) and not env.manager.client.rate_limited
    host = urlsplit(env.cluster.url).netloc
    assert values(samples, "kustomize_controller_kube_client_throttling", host=host,
                  mode="priority-and-fairness") == [1.0]
