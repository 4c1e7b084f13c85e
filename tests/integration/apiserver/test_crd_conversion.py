"""CRD version conversion: strategy None prunes, strategy Webhook calls a ConversionReview v1 webhook.

The strategy-None test holds on a real kube-apiserver (observed on v1.36); the webhook tests run a
small HTTPS webhook on this machine, which only the embedded server can call.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import json
import ssl
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kustomize_controller.conversion.certs import renew

from .helpers import call
from .test_crd import CRD_PATH, _established

pytestmark = pytest.mark.integration

Review = dict[str, Any]


def two_version_crd(group: str, conversion: dict[str, Any] | None = None) -> dict[str, Any]:
    """Widgets: v1 (storage) has spec.size; v1beta1 (served) has spec.size and spec.legacy."""
    def version(name: str, storage: bool, props: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "served": True, "storage": storage, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": props},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}
    crd: dict[str, Any] = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                 "versions": [version("v1", True, {"size": {"type": "integer"}, "name": {"type": "string"}}),
                              version("v1beta1", False, {"size": {"type": "integer"},
                                                         "legacy": {"type": "string"}})]},
    }
    if conversion is not None:
        crd["spec"]["conversion"] = conversion
    return crd


def widget(group: str, version: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{group}/{version}", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec}


def path(group: str, version: str, namespace: str, name: str = "") -> str:
    base = f"/apis/{group}/{version}/namespaces/{namespace}/widgets"
    return f"{base}/{name}" if name else base


async def install(http: Any, crd: dict[str, Any]) -> None:
    status, body = await call(http, "POST", CRD_PATH, body=crd)
    assert status == 201, body
    await _established(http, crd["metadata"]["name"])
    group = crd["spec"]["group"]
    for _ in range(50):
        if (await call(http, "GET", f"/apis/{group}/v1beta1"))[0] == 200:
            return
        await asyncio.sleep(0.1)


async def test_strategy_none_drops_what_the_storage_version_lacks(cluster: Any) -> None:
    group = f"{cluster.namespace}.none.example.com"
    ns = cluster.namespace
    async with cluster.session() as http:
        try:
            await install(http, two_version_crd(group))
            status, created = await call(http, "POST", path(group, "v1beta1", ns),
                                         body=widget(group, "v1beta1", {"size": 2, "legacy": "kept?"}))
            assert status == 201, created
            for version in ("v1", "v1beta1"):
                status, got = await call(http, "GET", path(group, version, ns, "w"))
                assert status == 200 and got["apiVersion"] == f"{group}/{version}"
                assert got["spec"] == {"size": 2}  # legacy is gone without a word
        finally:
            await call(http, "DELETE", f"{CRD_PATH}/widgets.{group}")


# --- strategy Webhook (embedded server only) -----------------------------------------------------------


class Webhook:
    """A conversion webhook: v1beta1.legacy <-> v1.name; ``behaviour`` can break it on purpose."""

    def __init__(self) -> None:
        self.reviews: list[Review] = []
        self.behaviour: Callable[[Review], Review] | None = None
        self.url = ""
        self.ca = b""

    def convert(self, review: Review) -> Review:
        request = review["request"]
        out = []
        for obj in request["objects"]:
            obj = {**obj, "spec": dict(obj.get("spec") or {})}
            target = request["desiredAPIVersion"]
            if target.endswith("/v1") and "legacy" in obj["spec"]:
                obj["spec"]["name"] = obj["spec"].pop("legacy")
            elif target.endswith("/v1beta1") and "name" in obj["spec"]:
                obj["spec"]["legacy"] = obj["spec"].pop("name")
            obj["apiVersion"] = target
            out.append(obj)
        return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "response": {"uid": request["uid"], "convertedObjects": out, "result": {"status": "Success"}}}

    async def handle(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviews.append(review)
        answer = self.behaviour(review) if self.behaviour else self.convert(review)
        return web.json_response(answer)


@contextlib.asynccontextmanager
async def running_webhook() -> AsyncIterator[tuple[Webhook, web.AppRunner]]:
    hook = Webhook()
    bundle = renew(None, hosts=["127.0.0.1"], now=datetime.datetime.now(datetime.UTC))
    assert bundle is not None
    app = web.Application()
    app.router.add_post("/convert", hook.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=_server_context(bundle.cert, bundle.key))
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    hook.url, hook.ca = f"https://127.0.0.1:{port}/convert", bundle.ca_bundle
    try:
        yield hook, runner
    finally:
        await runner.cleanup()


def _server_context(cert: bytes, key: bytes) -> ssl.SSLContext:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "c").write_bytes(cert)
        Path(tmp, "k").write_bytes(key)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(Path(tmp, "c"), Path(tmp, "k"))
    return context


def webhook_conversion(hook: Webhook, ca: bytes | None = None) -> dict[str, Any]:
    return {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {
        "url": hook.url, "caBundle": base64.b64encode(ca if ca is not None else hook.ca).decode()}}}


async def test_webhook_converts_writes_to_storage_and_reads_back(cluster: Any) -> None:
    cluster.require_server()
    group = f"{cluster.namespace}.hook.example.com"
    ns = cluster.namespace
    async with running_webhook() as (hook, _), cluster.session() as http:
        await install(http, two_version_crd(group, webhook_conversion(hook)))
        status, created = await call(http, "POST", path(group, "v1beta1", ns),
                                     body=widget(group, "v1beta1", {"size": 2, "legacy": "old"}))
        assert status == 201, created
        assert created["apiVersion"] == f"{group}/v1beta1" and created["spec"] == {"size": 2, "legacy": "old"}
        first = hook.reviews[0]
        assert first["apiVersion"] == "apiextensions.k8s.io/v1" and first["kind"] == "ConversionReview"
        assert first["request"]["desiredAPIVersion"] == f"{group}/v1"
        calls = len(hook.reviews)
        status, stored = await call(http, "GET", path(group, "v1", ns, "w"))
        assert stored["spec"] == {"size": 2, "name": "old"}  # stored as v1, converted by the webhook
        assert len(hook.reviews) == calls  # reading the storage version needs no webhook
        status, listed = await call(http, "GET", path(group, "v1beta1", ns))
        assert [i["spec"] for i in listed["items"]] == [{"size": 2, "legacy": "old"}]
        status, patched = await call(http, "PATCH", path(group, "v1beta1", ns, "w"),
                                     body={"spec": {"legacy": "new"}}, content_type="application/merge-patch+json")
        assert status == 200 and patched["spec"]["legacy"] == "new"
        status, stored = await call(http, "GET", path(group, "v1", ns, "w"))
        assert stored["spec"]["name"] == "new"


async def test_watch_through_an_old_version_converts_events(cluster: Any) -> None:
    cluster.require_server()
    group = f"{cluster.namespace}.watch.example.com"
    ns = cluster.namespace
    async with running_webhook() as (hook, _), cluster.session() as http:
        await install(http, two_version_crd(group, webhook_conversion(hook)))
        await call(http, "POST", path(group, "v1", ns), body=widget(group, "v1", {"size": 1, "name": "n"}))
        async with http.get(path(group, "v1beta1", ns), params={"watch": "true", "resourceVersion": "0",
                                                                  "timeoutSeconds": "2"}) as resp:
            line = await resp.content.readline()
        event = json.loads(line)
        assert event["type"] == "ADDED"
        assert event["object"]["apiVersion"] == f"{group}/v1beta1"
        assert event["object"]["spec"] == {"size": 1, "legacy": "n"}


async def test_webhook_down_fails_old_version_requests_only(cluster: Any) -> None:
    cluster.require_server()
    group = f"{cluster.namespace}.down.example.com"
    ns = cluster.namespace
    async with running_webhook() as (hook, runner), cluster.session() as http:
        await install(http, two_version_crd(group, webhook_conversion(hook)))
        await call(http, "POST", path(group, "v1", ns), body=widget(group, "v1", {"size": 1}))
        await runner.cleanup()  # the webhook is gone
        status, body = await call(http, "GET", path(group, "v1beta1", ns, "w"))
        assert status == 500 and "reason" not in body
        assert body["message"].startswith(f"conversion webhook for {group}/v1, Kind=Widget failed: Post ")
        status, body = await call(http, "POST", path(group, "v1beta1", ns),
                                  body={**widget(group, "v1beta1", {"size": 3}), "metadata": {"name": "x"}})
        assert status == 500
        status, _ = await call(http, "GET", path(group, "v1", ns, "x"))
        assert status == 404  # nothing stored
        status, got = await call(http, "GET", path(group, "v1", ns, "w"))
        assert status == 200 and got["spec"] == {"size": 1}  # the storage version is served regardless
        status, _ = await call(http, "POST", path(group, "v1", ns),
                               body={**widget(group, "v1", {"size": 4}), "metadata": {"name": "y"}})
        assert status == 201


async def test_webhook_certificate_must_match_the_ca_bundle(cluster: Any) -> None:
    cluster.require_server()
    group = f"{cluster.namespace}.ca.example.com"
    other = renew(None, hosts=["127.0.0.1"], now=datetime.datetime.now(datetime.UTC))
    assert other is not None
    async with running_webhook() as (hook, _), cluster.session() as http:
        await install(http, two_version_crd(group, webhook_conversion(hook, ca=other.ca_bundle)))
        status, body = await call(http, "POST", path(group, "v1beta1", cluster.namespace),
                                  body=widget(group, "v1beta1", {"size": 1}))
        assert status == 500 and "certificate" in body["message"].lower(), body
        assert hook.reviews == []


@pytest.mark.parametrize(("behaviour", "fragment"), [
    (lambda r: {"response": {"uid": r["request"]["uid"], "result": {"status": "Failure",
                                                                      "message": "spec.legacy: no way"}}},
     "failed: spec.legacy: no way"),
    (lambda r: {"response": {"uid": "other", "result": {"status": "Success"}, "convertedObjects": []}},
     "expected response uid"),
    (lambda r: {"response": {"uid": r["request"]["uid"], "result": {"status": "Success"}, "convertedObjects": []}},
     "expected 1 converted objects, got 0"),
    (lambda r: {"response": {"uid": r["request"]["uid"], "result": {"status": "Success"}, "convertedObjects": [
        {**r["request"]["objects"][0], "apiVersion": r["request"]["desiredAPIVersion"],
         "metadata": {**r["request"]["objects"][0]["metadata"], "name": "renamed"}}]}},
     "invalid metadata"),
], ids=["failure", "uid", "count", "metadata"])
async def test_a_bad_webhook_answer_fails_the_request_and_stores_nothing(
        cluster: Any, behaviour: Callable[[Review], Review], fragment: str) -> None:
    cluster.require_server()
    group = f"{cluster.namespace}.bad.example.com"
    ns = cluster.namespace
    async with running_webhook() as (hook, _), cluster.session() as http:
        hook.behaviour = behaviour
        await install(http, two_version_crd(group, webhook_conversion(hook)))
        status, body = await call(http, "POST", path(group, "v1beta1", ns), body=widget(group, "v1beta1", {"size": 1}))
        assert status == 500 and fragment in body["message"], body
        status, _ = await call(http, "GET", path(group, "v1", ns, "w"))
        assert status == 404
