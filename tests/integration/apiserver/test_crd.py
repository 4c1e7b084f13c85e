"""CRD registration: a new kind is served with its scope and status subresource and is Established."""

from __future__ import annotations

import asyncio

import pytest

from .helpers import MERGE, call

pytestmark = pytest.mark.integration

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def widget_crd(group: str, *, status: bool = True, scope: str = "Namespaced") -> dict:
    version = {
        "name": "v1", "served": True, "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}},
    }
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {"group": group, "scope": scope,
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList",
                           "shortNames": ["wdg"]},
                 "versions": [version]},
    }


async def _established(http, name):
    for _ in range(100):
        _, crd = await call(http, "GET", f"{CRD_PATH}/{name}")
        conds = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
        if conds.get("Established") == "True":
            return crd
        await asyncio.sleep(0.1)
    raise AssertionError(f"{name} not established")


def _group(cluster) -> str:
    return f"{cluster.namespace}.test.example.com"


async def test_crd_registration_serves_the_kind(cluster):
    group = _group(cluster)
    ns = cluster.namespace
    async with cluster.session() as http:
        try:
            status, crd = await call(http, "POST", CRD_PATH, body=widget_crd(group))
            assert status == 201, crd
            await _established(http, f"widgets.{group}")
            for _ in range(50):
                status, resources = await call(http, "GET", f"/apis/{group}/v1")
                if status == 200:
                    break
                await asyncio.sleep(0.1)
            entries = {r["name"]: r for r in resources["resources"]}
            assert entries["widgets"]["namespaced"] is True
            assert entries["widgets"]["kind"] == "Widget"
            assert "wdg" in entries["widgets"].get("shortNames", [])
            assert "widgets/status" in entries
            _, groups = await call(http, "GET", "/apis")
            assert group in {g["name"] for g in groups["groups"]}

            base = f"/apis/{group}/v1/namespaces/{ns}/widgets"
            status, obj = await call(http, "POST", base, body={
                "apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}})
            assert status == 201, obj
            assert obj["metadata"]["generation"] == 1
            _, listed = await call(http, "GET", base)
            assert listed["kind"] == "WidgetList"
            assert listed["items"][0]["kind"] == "Widget"
        finally:
            await call(http, "DELETE", f"{CRD_PATH}/widgets.{group}")


async def test_generation_without_status_subresource_counts_status(cluster):
    group = _group(cluster)
    ns = cluster.namespace
    async with cluster.session() as http:
        try:
            await call(http, "POST", CRD_PATH, body=widget_crd(group, status=False))
            await _established(http, f"widgets.{group}")
            base = f"/apis/{group}/v1/namespaces/{ns}/widgets"
            for _ in range(50):
                status, obj = await call(http, "POST", base, body={
                    "apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"a": 1}})
                if status != 404:
                    break
                await asyncio.sleep(0.1)
            assert status == 201, obj
            _, obj = await call(http, "PATCH", f"{base}/w", body={"status": {"ready": True}}, content_type=MERGE)
            assert obj["metadata"]["generation"] == 2
            assert obj["status"] == {"ready": True}
            _, obj = await call(http, "PATCH", f"{base}/w", body={"metadata": {"labels": {"a": "b"}}},
                                content_type=MERGE)
            assert obj["metadata"]["generation"] == 2
            status, _ = await call(http, "GET", f"{base}/w/status")
            assert status == 404
        finally:
            await call(http, "DELETE", f"{CRD_PATH}/widgets.{group}")


async def test_cluster_scoped_custom_resource(cluster):
    group = _group(cluster)
    async with cluster.session() as http:
        try:
            await call(http, "POST", CRD_PATH, body=widget_crd(group, scope="Cluster"))
            await _established(http, f"widgets.{group}")
            for _ in range(50):
                status, obj = await call(http, "POST", f"/apis/{group}/v1/widgets", body={
                    "apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "cw"}})
                if status != 404:
                    break
                await asyncio.sleep(0.1)
            assert status == 201, obj
            assert "namespace" not in obj["metadata"]
            status, _ = await call(http, "GET", f"/apis/{group}/v1/namespaces/{cluster.namespace}/widgets/cw")
            assert status == 404
        finally:
            await call(http, "DELETE", f"{CRD_PATH}/widgets.{group}")


async def test_deleting_the_crd_stops_serving_the_kind(cluster):
    server = cluster.require_server()
    group = _group(cluster)
    async with cluster.session() as http:
        await call(http, "POST", CRD_PATH, body=widget_crd(group))
        await call(http, "POST", f"/apis/{group}/v1/namespaces/{cluster.namespace}/widgets", body={
            "apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}})
        status, _ = await call(http, "DELETE", f"{CRD_PATH}/widgets.{group}")
        assert status == 200
        status, _ = await call(http, "GET", f"/apis/{group}/v1/namespaces/{cluster.namespace}/widgets")
        assert status == 404
        assert server.object_count(f"{group}/v1", "Widget") == 0


async def test_invalid_crd_name_is_rejected(cluster):
    bad = widget_crd(_group(cluster))
    bad["metadata"]["name"] = f"wrong.{_group(cluster)}"
    async with cluster.session() as http:
        try:
            status, body = await call(http, "POST", CRD_PATH, body=bad)
            assert (status, body["reason"]) == (422, "Invalid")
        finally:  # should the server take it after all
            await call(http, "DELETE", f"{CRD_PATH}/{bad['metadata']['name']}")


async def test_a_changed_conversion_ca_bundle_must_hold_certificates(cluster):
    """kube-apiserver v1.36.3 (make test-real): a conversion webhook's caBundle is checked on update when it
    changes — unless the stored one was unusable already — and taken as it is on create. (The real server
    decides against its cached copy of the CRD: right after a write it may still take a bad bundle, so the
    refusals are tried once the CRD is Established.)"""
    import base64

    from tests.integration.controller.test_crd_conversion_owner import CA_PEM

    def webhook(bundle: str) -> dict:
        return {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {
            "url": "https://127.0.0.1:9999/convert", "caBundle": bundle}}}

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    group = _group(cluster)
    checked, ratcheted = f"widgets.{group}", f"widgets.r{group}"
    prefix = f'CustomResourceDefinition.apiextensions.k8s.io "{checked}" is invalid: ' \
             "spec.conversion.webhookClientConfig.caBundle: Invalid value: "
    async with cluster.session() as http:
        try:
            status, crd = await call(http, "POST", CRD_PATH, body=widget_crd(group))
            assert status == 201, crd
            await _established(http, checked)
            for bundle, problem in [
                ("Q0E=", "unable to parse bytes as PEM block"),
                (b64(b"-----BEGIN PRIVATE KEY-----\nQUJD\n-----END PRIVATE KEY-----\n"),
                 "no valid certificate authority data seen"),
                (b64(b"-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n"),
                 "failed to parse certificate: x509: malformed certificate"),
            ]:
                status, answer = await call(http, "PATCH", f"{CRD_PATH}/{checked}", content_type=MERGE,
                                            body={"spec": {"conversion": webhook(bundle)}})
                assert (status, answer.get("reason")) == (422, "Invalid"), answer
                assert answer["message"].startswith(f'{prefix}"{bundle}": unable to load root certificates: '
                                                    f"{problem}"), answer["message"]
            status, crd = await call(http, "PATCH", f"{CRD_PATH}/{checked}", content_type=MERGE,
                                     body={"spec": {"conversion": webhook(b64(CA_PEM + b"trailing text\n"))}})
            assert status == 200, crd

            body = widget_crd(f"r{group}")
            body["spec"]["conversion"] = webhook("Q0E=")
            status, crd = await call(http, "POST", CRD_PATH, body=body)
            assert status == 201, crd  # a create takes any bytes
            status, crd = await call(http, "PATCH", f"{CRD_PATH}/{ratcheted}", content_type=MERGE,
                                     body={"spec": {"conversion": webhook(b64(b"-----BEGIN CERTIFICATE-----\nQUJD\n"
                                                                               b"-----END CERTIFICATE-----\n"))}})
            assert status == 200, crd  # the stored bundle was unusable already: not checked
        finally:
            await call(http, "DELETE", f"{CRD_PATH}/{checked}")
            await call(http, "DELETE", f"{CRD_PATH}/{ratcheted}")
