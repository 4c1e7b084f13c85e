"""The ``cluster`` fixture gives a namespace, credentials and the installed CRDs."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


async def test_namespace_exists_and_crds_are_served(cluster):
    async with cluster.session() as http:
        async with http.get(f"/api/v1/namespaces/{cluster.namespace}") as resp:
            assert resp.status == 200
            assert (await resp.json())["status"]["phase"] == "Active"
        async with http.get("/apis/kustomize.toolkit.fluxcd.io/v1") as resp:
            assert resp.status == 200
            names = {r["name"] for r in (await resp.json())["resources"]}
            assert {"kustomizations", "kustomizations/status"} <= names
        async with http.get("/apis/source.toolkit.fluxcd.io/v1") as resp:
            names = {r["name"] for r in (await resp.json())["resources"]}
            assert {"gitrepositories", "buckets"} <= names
        async with http.get(
                f"/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{cluster.namespace}/kustomizations") as resp:
            assert resp.status == 200
            assert (await resp.json())["items"] == []


async def test_kubeconfig_works_with_kubernetes_asyncio(cluster):
    from kubernetes_asyncio import client, config

    configuration = client.Configuration()
    await config.load_kube_config(config_file=cluster.kubeconfig_path, client_configuration=configuration)
    assert configuration.host.rstrip("/") == cluster.url
    async with client.ApiClient(configuration) as api:
        namespaces = await client.CoreV1Api(api).list_namespace(field_selector=f"metadata.name={cluster.namespace}")
        assert [ns.metadata.name for ns in namespaces.items] == [cluster.namespace]


async def test_the_leak_check_names_what_a_test_left_and_who_left_it():
    """tests/leakcheck.py on a private embedded server: a namespace held by a finalizer, an extra CRD."""
    from kustomize_controller.testing.apiserver import ApiServer
    from tests import leakcheck
    from tests.conftest import ClusterHandle

    from .helpers import call, cm_path, configmap, release
    from .test_crd import CRD_PATH, widget_crd

    async with ApiServer() as server:
        handle = ClusterHandle(kubeconfig_path=server.kubeconfig_path, url=server.url, token=server.token,
                               namespace="leaky", server=server, ssl_context=server.ssl_context())
        async with handle.session() as http:
            await call(http, "POST", "/api/v1/namespaces", body={"metadata": {"name": "leaky"}})
            before = await leakcheck.snapshot(handle)
            held = configmap("held")
            held["metadata"]["finalizers"] = ["example.com/hold"]
            await call(http, "POST", cm_path("leaky"), body=held)
            await call(http, "POST", CRD_PATH, body=widget_crd("leak.example.com"))
            await call(http, "DELETE", "/api/v1/namespaces/leaky")

            with pytest.raises(AssertionError) as info:
                await leakcheck.raise_if_left(handle, "test_x", before)
            assert str(info.value).splitlines()[1:] == [
                "  CustomResourceDefinition/widgets.leak.example.com (never deleted)",
                "  Namespace/leaky (Terminating: held by configmaps/held ['example.com/hold'])"]
            tracker = leakcheck.LeakTracker()
            tracker.record("test_x", (await leakcheck.snapshot(handle)) - before | {("Namespace", "leaky")})
            assert await tracker.leftovers(handle, wait=0) == [
                "CustomResourceDefinition/widgets.leak.example.com (never deleted), left by test_x",
                "Namespace/leaky (Terminating: held by configmaps/held ['example.com/hold']), left by test_x"]

            await release(http, cm_path("leaky", "held"))
            await call(http, "DELETE", f"{CRD_PATH}/widgets.leak.example.com")
            await leakcheck.raise_if_left(handle, "test_x", before)
            assert await tracker.leftovers(handle, wait=0) == []
