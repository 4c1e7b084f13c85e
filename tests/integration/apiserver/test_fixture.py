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
