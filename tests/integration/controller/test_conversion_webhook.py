"""The controller's conversion webhook: certificate Secret, CRD caBundle/url, ConversionReview over HTTPS.

The controller runs on this machine with ``--webhook-url=auto``, so only an API server on this machine
(the embedded one, or a local kube-apiserver) could call it back; the tests here call it themselves.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
import ssl
from typing import Any

import aiohttp
import pytest

from kustomize_controller.api.crdgen import CONVERSION_SERVICE as SERVICE_NAME
from kustomize_controller.conversion.crd import service_reference
from kustomize_controller.conversion.webhook import SECRET_NAME
from kustomize_controller.kube.errors import NotFoundError
from kustomize_controller.settings import replace
from tests.integration.controller.conftest import ControllerEnv, Instance
from tests.processes import free_port

pytestmark = pytest.mark.integration

CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "kustomizations.kustomize.toolkit.fluxcd.io")


async def webhook_config(env: ControllerEnv, *, within: float = 30.0, not_url: str = "") -> dict[str, Any]:
    """The CRD's conversion clientConfig once the controller has pointed it at itself."""
    deadline = asyncio.get_running_loop().time() + within
    config: dict[str, Any] = {}
    while asyncio.get_running_loop().time() < deadline:
        crd = await env.client.get(*CRD)
        config = crd["spec"].get("conversion", {}).get("webhook", {}).get("clientConfig", {})
        if config.get("url") and config.get("caBundle") and config["url"] != not_url:
            return dict(config)
        await asyncio.sleep(0.1)
    raise AssertionError(f"the controller did not point the CRD's conversion at itself: {config}")


async def start_with_webhook(env: ControllerEnv, **overrides: Any) -> dict[str, Any]:
    await env.start(webhook_addr="127.0.0.1:0", webhook_url="auto", **overrides)
    return await webhook_config(env)


def review_request(objects: list[dict[str, Any]], desired: str) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "7f0c", "desiredAPIVersion": desired, "objects": objects}}


async def post_review(config: dict[str, Any], body: dict[str, Any]) -> tuple[int, Any]:
    context = ssl.create_default_context(cadata=base64.b64decode(config["caBundle"]).decode())
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context),
                                     timeout=aiohttp.ClientTimeout(total=30)) as http, \
            http.post(config["url"], json=body) as resp:
        return resp.status, await resp.json(content_type=None) if resp.status == 200 else await resp.text()


async def test_webhook_serves_conversion_reviews_over_verified_https(env: ControllerEnv) -> None:
    env.cluster.require_server()  # the controller's loopback address is reachable from here only
    config = await start_with_webhook(env)
    assert config["url"].startswith("https://127.0.0.1:") and config["url"].endswith("/convert")
    assert "service" not in config
    secret = await env.client.get("v1", "Secret", SECRET_NAME, env.namespace)
    assert secret["type"] == "kubernetes.io/tls"
    assert base64.b64decode(secret["data"]["ca.crt"]) == base64.b64decode(config["caBundle"])

    old = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1beta2", "kind": "Kustomization",
           "metadata": {"name": "app", "namespace": env.namespace},
           "spec": {"interval": "5m", "prune": True, "validation": "client",
                    "sourceRef": {"kind": "GitRepository", "name": "repo"}}}
    status, body = await post_review(config, review_request([old], "kustomize.toolkit.fluxcd.io/v1"))
    assert status == 200, body
    response = body["response"]
    assert response["uid"] == "7f0c" and response["result"]["status"] == "Success"
    (converted,) = response["convertedObjects"]
    assert converted["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1"
    assert "validation" not in converted["spec"]

    status, text = await post_review(config, {"kind": "NotAReview"})
    assert status == 400 and "ConversionReview" in text


async def test_a_restarted_controller_reuses_the_certificate_and_repairs_the_crd(env: ControllerEnv) -> None:
    env.cluster.require_server()
    first = await start_with_webhook(env)
    await env.stop()
    # someone re-applies the CRD without caBundle (kubectl replace): the next controller puts it back
    crd = await env.client.get(*CRD)
    crd["spec"]["conversion"]["webhook"]["clientConfig"] = {"url": "https://127.0.0.1:1/convert"}
    await env.client.update(crd)
    second = await start_with_webhook(env)
    assert second["caBundle"] == first["caBundle"]  # same Secret, same CA: no churn for replicas
    assert second["url"] != "https://127.0.0.1:1/convert"


async def test_cert_manager_mode_serves_the_given_certificate_and_leaves_the_ca_bundle_alone(
        env: ControllerEnv, tmp_path: Any) -> None:
    from kustomize_controller.conversion.certs import renew
    from kustomize_controller.runtime.clock import RealClock

    env.cluster.require_server()
    bundle = renew(None, hosts=["127.0.0.1"], now=RealClock().now())
    assert bundle is not None
    (tmp_path / "tls.crt").write_bytes(bundle.cert)
    (tmp_path / "tls.key").write_bytes(bundle.key)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    before = await env.client.get(*CRD)
    await env.start(webhook_addr=f"127.0.0.1:{port}", webhook_cert_dir=str(tmp_path))
    config = {"url": f"https://127.0.0.1:{port}/convert", "caBundle": base64.b64encode(bundle.ca_bundle).decode()}
    body = review_request([], "kustomize.toolkit.fluxcd.io/v1")
    for _ in range(300):  # until it listens with the given certificate (trusted through its CA only)
        try:
            status, answer = await post_review(config, body)
            break
        except aiohttp.ClientError:
            await asyncio.sleep(0.1)
    else:
        raise AssertionError("the webhook did not answer with the certificate of --webhook-cert-dir")
    assert status == 200 and answer["response"]["result"]["status"] == "Success"
    # it points the CRD at its Service, and leaves caBundle to cert-manager's CA injector
    for _ in range(300):
        after = await env.client.get(*CRD)
        if after["spec"].get("conversion", {}).get("strategy") == "Webhook":
            break
        await asyncio.sleep(0.1)
    assert "conversion" not in before["spec"] or before["spec"]["conversion"].get("strategy") != "Webhook"
    assert after["spec"]["conversion"]["webhook"]["clientConfig"] == {
        "service": service_reference(SERVICE_NAME, env.namespace)}
    with pytest.raises(NotFoundError):
        await env.client.get("v1", "Secret", SECRET_NAME, env.namespace)


async def test_replicas_racing_for_the_certificate_serve_the_same_ca(env: ControllerEnv) -> None:
    from kustomize_controller.conversion.secret import ensure_certificate
    from kustomize_controller.runtime.clock import RealClock

    now = RealClock().now()
    results = await asyncio.gather(*(
        ensure_certificate(env.client, namespace=env.namespace, name="race", hosts=[host], now=now)
        for host in ("a.example.svc", "b.example.svc", "a.example.svc")))
    stored = await env.client.get("v1", "Secret", "race", env.namespace)
    bundle = base64.b64decode(stored["data"]["ca.crt"])
    # whoever lost a write read the winner's Secret again: one CA for everybody
    assert {r.ca_bundle for r in results} == {bundle}
    again = await ensure_certificate(env.client, namespace=env.namespace, name="race",
                                     hosts=["a.example.svc", "b.example.svc"], now=now)
    assert again.ca_bundle == bundle


async def test_with_upstreams_v1_only_crd_nothing_is_written(env: ControllerEnv) -> None:
    """A drop-in on upstream's CRD and RBAC: no conversion needed, so no Secret and no CRD change."""
    server = env.cluster.require_server()
    crd = await env.client.get(*CRD)
    crd["spec"]["versions"] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    crd["spec"].pop("conversion", None)
    before = await env.client.update(crd)
    server.requests.clear()
    await env.start(webhook_addr="127.0.0.1:0", webhook_url="auto")
    # the webhook's first refresh starts by reading the CRD (nothing else of the controller does)
    for _ in range(300):
        if server.requests.select(verb="get", resource="customresourcedefinitions"):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the webhook never read the CRD")
    await asyncio.sleep(0.5)  # the rest of that refresh (a Secret read and write would follow at once)
    # the informers of watched (labelled) Secrets list and watch the namespace; the webhook would read
    # or write its own Secret by name
    webhook_secret = [r for r in server.requests.select(resource="secrets", namespace=env.namespace)
                      if r.name or r.method != "GET"]
    assert webhook_secret == []
    after = await env.client.get(*CRD)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    with pytest.raises(NotFoundError):
        await env.client.get("v1", "Secret", SECRET_NAME, env.namespace)


async def test_a_standby_serves_leaves_the_crd_url_to_the_leader_and_takes_it_when_leading(env: ControllerEnv) -> None:
    env.cluster.require_server()
    leader_port, standby_port = free_port(), free_port()
    base = replace(env.settings, enable_leader_election=True, webhook_url="auto")
    leader = Instance(replace(base, webhook_addr=f"127.0.0.1:{leader_port}"))
    standby = Instance(replace(base, webhook_addr=f"127.0.0.1:{standby_port}"))
    leader.start()
    try:
        await leader.wait_leader()
        config = await webhook_config(env)
        assert config["url"] == f"https://127.0.0.1:{leader_port}/convert"
        standby.start()
        standby_config = {**config, "url": f"https://127.0.0.1:{standby_port}/convert"}
        body = review_request([], "kustomize.toolkit.fluxcd.io/v1")
        for _ in range(300):  # the standby serves (its first refresh loaded the shared certificate)
            with contextlib.suppress(aiohttp.ClientError):
                status, _ = await post_review(standby_config, body)
                if status == 200:
                    break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the standby's webhook never answered")
        await asyncio.sleep(0.5)  # the rest of that refresh: it would have patched the CRD by now
        assert (await webhook_config(env))["url"] == config["url"]
        # the leader stops (releasing the Lease): the stand-by leads and points the CRD at itself at
        # once, not at its next refresh a minute later (webhook_config waits 30 s at most)
        await leader.stop()
        assert (await webhook_config(env, not_url=config["url"]))["url"] == standby_config["url"]
    finally:
        await standby.stop()
        await leader.stop()
