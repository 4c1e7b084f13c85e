"""Fixtures for the apply engine against the ``cluster`` API: a real ``KubeClient`` and helpers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from kustomize_controller.apply.manager import ResourceManager
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.runtime.clock import RealClock
from kustomize_controller.testing.apiserver.requestlog import RequestRecord


@pytest.fixture
async def kube(cluster: Any) -> AsyncIterator[KubeClient]:
    config = await load_kubeconfig(cluster.kubeconfig_path)
    client = KubeClient(config=config)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def manager(kube: KubeClient) -> ResourceManager:
    return ResourceManager(client=kube, clock=RealClock(), concurrency=4)


def writes(cluster: Any, *, since: int = 0) -> list[RequestRecord]:
    """Successful non-dry-run writes served since the request-log mark ``since``."""
    server = cluster.require_server()
    records = list(server.requests)[since:]
    return [r for r in records if r.is_write and not r.dry_run and r.status < 400]


def mark(cluster: Any) -> int:
    return len(cluster.require_server().requests)


def configmap(name: str, namespace: str, data: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, **meta},
        "data": data if data is not None else {"key": "value"},
    }
