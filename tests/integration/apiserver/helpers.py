"""Plain-HTTP helpers for the conformance tests (no project client code: these run on a real cluster too)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


async def call(http: aiohttp.ClientSession, method: str, path: str, *, body: Any = None,
               params: dict[str, str] | None = None, content_type: str = "application/json",
               headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    data = None if body is None else json.dumps(body)
    all_headers = {"Content-Type": content_type, **(headers or {})}
    async with http.request(method, path, data=data, params=params, headers=all_headers) as resp:
        text = await resp.text()
        return resp.status, (json.loads(text) if text.strip().startswith("{") else {"raw": text})


async def release(http: aiohttp.ClientSession, path: str) -> None:
    """Strip the finalizers of the object at ``path`` (if it is still there), so that its deletion, or
    its namespace's, can finish: for a test's ``finally``."""
    await call(http, "PATCH", path, content_type=MERGE, body={"metadata": {"finalizers": None}})


async def delete_and_wait(http: aiohttp.ClientSession, path: str, *, seconds: float = 60.0) -> int:
    """DELETE ``path`` and poll until it is gone (a real namespace controller takes seconds); the last
    GET's status (404 when gone)."""
    await call(http, "DELETE", path)
    status = 200
    for _ in range(int(seconds * 10)):
        status, _ = await call(http, "GET", path)
        if status == 404:
            break
        await asyncio.sleep(0.1)
    return status


def cm_path(namespace: str, name: str = "") -> str:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    return f"{base}/{name}" if name else base


def configmap(name: str, data: dict[str, str] | None = None, labels: dict[str, str] | None = None
              ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {}}


def deployment(name: str, *, image: str = "nginx:1", replicas: int = 1, labels: dict[str, str] | None = None
               ) -> dict[str, Any]:
    match = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, **({"labels": labels} if labels else {})},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": match},
            "template": {"metadata": {"labels": match},
                         "spec": {"containers": [{"name": "app", "image": image}]}},
        },
    }


async def read_watch(http: aiohttp.ClientSession, path: str, params: dict[str, str], *, until: int | None = None,
                     ) -> list[dict[str, Any]]:
    """Events of a watch until the stream ends (or ``until`` events arrived)."""
    events: list[dict[str, Any]] = []
    async with http.get(path, params={"watch": "true", **params}) as resp:
        assert resp.status == 200, await resp.text()
        async for line in resp.content:
            if not line.strip():
                continue
            events.append(json.loads(line))
            if until is not None and len(events) >= until:
                break
    return events


def manager_entries(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e for e in obj["metadata"].get("managedFields") or []}
