import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from kustomize_controller.kube.discovery import NoKindMatchError, ResourceInfo, RestMapper
from kustomize_controller.kube.errors import InternalServerError, NotFoundError


class Discovery:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.gate = asyncio.Event()
        self.fail: Exception | None = None
        self.served = {
            "/api/v1": [
                {"name": "configmaps", "kind": "ConfigMap", "namespaced": True},
                {"name": "namespaces", "kind": "Namespace", "namespaced": False},
                {"name": "namespaces/status", "kind": "Namespace", "namespaced": False},
            ],
            "/apis/apps/v1": [
                {"name": "deployments", "kind": "Deployment", "namespaced": True},
                {"name": "deployments/scale", "kind": "Scale", "namespaced": True},
            ],
        }

    async def fetch(self, path: str) -> Mapping[str, Any]:
        self.calls.append(path)
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        if path not in self.served:
            raise NotFoundError("not served", status=404)
        return {"resources": self.served[path]}


async def test_resolve_paths_and_scope() -> None:
    d = Discovery()
    d.gate.set()
    mapper = RestMapper(fetch=d.fetch)
    deploy = await mapper.resolve("apps/v1", "Deployment")
    assert deploy == ResourceInfo("apps", "v1", "deployments", "Deployment", True)
    assert (
        deploy.path(namespace="ns", name="web", subresource="status")
        == "/apis/apps/v1/namespaces/ns/deployments/web/status"
    )
    assert deploy.path() == "/apis/apps/v1/deployments"
    ns = await mapper.resolve("v1", "Namespace")
    assert ns.path(namespace="ignored", name="x") == "/api/v1/namespaces/x"
    assert ns.api_version == "v1" and deploy.api_version == "apps/v1"
    with pytest.raises(NoKindMatchError):
        await mapper.resolve("apps/v1", "Scale")  # subresources are not kinds of their own
    await mapper.resolve("v1", "ConfigMap")
    assert d.calls == ["/apis/apps/v1", "/api/v1", "/apis/apps/v1"]


async def test_concurrent_misses_share_one_request_and_one_error() -> None:
    d = Discovery()
    mapper = RestMapper(fetch=d.fetch)
    tasks = [asyncio.create_task(mapper.resolve("v1", "ConfigMap")) for _ in range(5)]
    await asyncio.sleep(0)
    d.gate.set()
    results = await asyncio.gather(*tasks)
    assert len({id(r) for r in results}) == 1 and d.calls == ["/api/v1"]

    d2 = Discovery()
    d2.fail = InternalServerError("etcd down", status=500)
    mapper2 = RestMapper(fetch=d2.fetch)
    tasks = [asyncio.create_task(mapper2.resolve("v1", "ConfigMap")) for _ in range(3)]
    await asyncio.sleep(0)
    d2.gate.set()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(o, InternalServerError) for o in outcomes) and d2.calls == ["/api/v1"]
    d2.fail = None
    assert (await mapper2.resolve("v1", "ConfigMap")).resource == "configmaps"  # errors are not cached


async def test_unserved_group_version_is_no_kind_match() -> None:
    d = Discovery()
    d.gate.set()
    with pytest.raises(NoKindMatchError) as err:
        await RestMapper(fetch=d.fetch).resolve("example.com/v1", "Widget")
    assert (err.value.group, err.value.version, err.value.kind) == ("example.com", "v1", "Widget")


async def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError):
        await RestMapper(fetch=Discovery().fetch).resolve("", "ConfigMap")
