"""The UI's security model tried (docs/ui.md): Host and Origin checks, CSRF tokens, the CSP header on every
answer, no Secret value or SOPS plaintext in any served response, markup from the cluster shown and never run."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import aiohttp
import pytest

from kustomize_controller.kustomize.sops.tree import EncryptionRules
from kustomize_controller.ui.server import UiServer
from tests.integration.controller.conftest import ControllerEnv
from tests.integration.controller.manifests import configmap, kustomization
from tests.unit.kustomize.sops.sopsgen import AgeKey, Recipe, encrypt_document

pytestmark = pytest.mark.integration

MARKUP = '<img src=x onerror="window.__xss=1">'
SECRET = "s3cr3t-plain-value"
SOPS_PLAIN = "sops-decrypted-plaintext"


def meta_csrf(html: str) -> str:
    found = re.search(r'<meta name="csrf-token" content="([0-9a-f]+)">', html)
    assert found, html[:500]
    return found.group(1)


async def test_host_origin_and_csrf_guard_every_action(env: ControllerEnv, ui: UiServer) -> None:
    await env.publish({"kustomization.yaml": kustomization("a.yaml"), "a.yaml": configmap("a")})
    await env.create(env.kustomization(targetNamespace=env.namespace))
    port = ui.url.rsplit(":", 1)[1]
    action = f"{ui.url}/ks/{env.namespace}/app/suspend"
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:  # IP hosts too
        for host in (f"evil.example:{port}", "127.0.0.1", f"127.0.0.1.nip.example:{port}"):
            async with http.get(ui.url + "/", headers={"Host": host}) as resp:
                assert resp.status == 421, host  # DNS rebinding: another name for this address is not answered
        for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
            async with http.get(ui.url + "/", headers={"Host": host}) as resp:
                assert resp.status == 200
                assert "'unsafe-inline'" not in resp.headers["Content-Security-Policy"]
                assert resp.headers["X-Frame-Options"] == "DENY"
                token = meta_csrf(await resp.text())
        origin = {"Origin": ui.url}
        refused = [
            ({}, {"csrf": token}),  # no Origin
            ({"Origin": "http://evil.example"}, {"csrf": token}),
            ({"Origin": "null"}, {"csrf": token}),
            (origin, {}),  # no token
            (origin, {"csrf": "0" * 64}),
        ]
        for headers, form in refused:
            async with http.post(action, headers=headers, data=form) as resp:
                assert resp.status == 403, (headers, form)
        async with http.get(action) as resp:
            assert resp.status == 405  # a GET never acts
        assert (await env.get_ks())["spec"].get("suspend") is not True
        async with http.post(action, headers={**origin, "X-CSRF-Token": token, "Accept": "application/json"}) as resp:
            assert resp.status == 200 and (await resp.json())["ok"]
        assert (await env.get_ks())["spec"]["suspend"] is True
    resume = action.replace("suspend", "resume")
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as stranger, \
            stranger.post(resume, headers={**origin, "X-CSRF-Token": token}) as refused:  # not its session's token
        assert refused.status == 403
    assert (await env.get_ks())["spec"]["suspend"] is True


async def test_no_secret_value_or_sops_plaintext_reaches_any_page(env: ControllerEnv, ui: UiServer) -> None:
    ns = env.namespace
    age = AgeKey.generate()
    await env.client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sops-age", "namespace": ns},
                             "stringData": {"key.agekey": age.identity}})

    def tree(value: str, plain: str) -> dict[str, str]:
        sops = encrypt_document({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sopsed"},
                                 "stringData": {"token": plain}}, "yaml",
                                Recipe(rules=EncryptionRules(encrypted_regex="^(data|stringData)$"),
                                       age_recipients=[age.recipient]))
        secret = ("apiVersion: v1\nkind: Secret\nmetadata:\n  name: plain\n"
                  f"stringData:\n  password: {value}\n")
        return {"kustomization.yaml": kustomization("secret.yaml", "sops.yaml", "cm.yaml"),
                "secret.yaml": secret, "sops.yaml": sops.decode(), "cm.yaml": configmap("cm", {"note": "visible"})}

    artifact = await env.publish(tree(SECRET, SOPS_PLAIN))
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, decryption={"provider": "sops",
                                                                       "secretRef": {"name": "sops-age"}}))
    obj = await env.wait_ready(revision=artifact["revision"])
    assert base64.b64decode((await env.get("v1", "Secret", "sopsed"))["data"]["token"]).decode() == SOPS_PLAIN
    # a new revision changes both values: the plan's diff of the Secrets must not carry them either
    await env.client.patch("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "app", ns,
                           {"spec": {"suspend": True}}, patch_type="merge")
    await env.publish(tree(SECRET + "-2", SOPS_PLAIN + "-2"))

    forbidden = [SECRET, SOPS_PLAIN, age.identity, env.cluster.token or "no-token"]
    forbidden += [base64.b64encode(v.encode()).decode() for v in (SECRET, SOPS_PLAIN, SECRET + "-2")]
    base = f"{ui.url}/ks/{ns}/app"
    paths = ["/", "/graph", "/graph.json", "/windows", f"/ks/{ns}/app", f"/ks/{ns}/app/inventory",
             f"/ks/{ns}/app/plan", "/fleet/select?selector=", *[
                 f"/ks/{ns}/app/object?id={e['id']}" for e in obj["status"]["inventory"]["entries"]]]
    seen: dict[str, str] = {}
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:  # IP hosts too
        for path in paths:
            async with http.get(ui.url + path) as resp:
                assert resp.status == 200, (path, await resp.text())
                seen[path] = await resp.text()
        for topic in ("fleet", f"ks:{ns}/app"):  # the first frame of a stream is a full snapshot
            async with http.get(f"{ui.url}/stream", params={"topic": topic, "since": "-1"}) as resp:
                seen[topic] = (await resp.content.readuntil(b"\n\n")).decode()
                assert json.loads(seen[topic].removeprefix("data: "))["full"] is True
    assert "***" in seen[f"/ks/{ns}/app/object?id={ns}_plain__Secret"]
    assert "Secret/" in seen[f"/ks/{ns}/app/plan"] and "configured" in seen[f"/ks/{ns}/app/plan"], \
        seen[f"/ks/{ns}/app/plan"][-3000:]
    for path, body in seen.items():
        for value in forbidden:
            assert value not in body, f"{path} shows a secret value"
    assert base in seen["/"] or f"/ks/{ns}/app" in seen["/"]


async def test_markup_from_the_cluster_is_shown_and_never_run(env: ControllerEnv, ui: UiServer,
                                                               browser: Any) -> None:
    ns = env.namespace
    cm = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",  # JSON is YAML, with any quotes in it
                     "metadata": {"name": "markup", "annotations": {"note": MARKUP}}, "data": {"html": MARKUP}})
    await env.publish({"kustomization.yaml": kustomization("cm.yaml"), "cm.yaml": cm})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    await env.wait_for("app", lambda o: bool((o.get("status") or {}).get("inventory")))
    await env.client.patch("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "app", ns, {"metadata": {
        "annotations": {"kustomize.toolkit.fluxcd.io/sync-windows": f"- kind: {MARKUP}"}}}, patch_type="merge")
    await env.client.create({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "xss", "namespace": ns},
                             "involvedObject": {"kind": "Kustomization", "name": "app", "namespace": ns,
                                                "apiVersion": "kustomize.toolkit.fluxcd.io/v1"},
                             "reason": "Markup", "message": MARKUP, "type": "Warning",
                             "lastTimestamp": "2026-01-01T00:00:00Z", "firstTimestamp": "2026-01-01T00:00:00Z"})
    pages = ["/", f"/ks/{ns}/app", f"/ks/{ns}/app/object?id={ns}_markup__ConfigMap", "/windows"]
    for path in pages:
        await browser.goto(ui.url + path)
        await browser.wait_for_load_state("networkidle")
        assert await browser.evaluate("window.__xss") is None, path
        assert await browser.locator("img").count() == 0, path
    await browser.goto(f"{ui.url}/ks/{ns}/app")
    await browser.wait_for_selector("#sec-events li.warning")
    assert MARKUP in await browser.inner_text("#sec-events")  # shown as text
    assert "kind: <img" in await browser.inner_text("#sec-spec")
    await browser.goto(f"{ui.url}/ks/{ns}/app/object?id={ns}_markup__ConfigMap")
    assert MARKUP in await browser.inner_text("#yaml")
    assert await browser.evaluate("window.__xss") is None
