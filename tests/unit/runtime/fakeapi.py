"""A tiny in-memory API for unit tests, served through ``MockTransport`` (no sockets).

It knows a handful of kinds, keeps a resourceVersion counter, does compare-and-swap on PUT, merge
patches, paginated lists and answers errors as ``Status`` bodies. Watches are not served here: tests
that need a stream script it themselves. Faults: ``fail_next[(method, resource)] = status``.
"""

from __future__ import annotations

import copy
import json
from typing import Any
from urllib.parse import urlsplit

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.transport import HttpRequest, MockResponse, MockTransport

RESOURCES = {
    "/api/v1": [
        {"name": "configmaps", "kind": "ConfigMap", "namespaced": True},
        {"name": "events", "kind": "Event", "namespaced": True},
        {"name": "namespaces", "kind": "Namespace", "namespaced": False},
    ],
    "/apis/coordination.k8s.io/v1": [{"name": "leases", "kind": "Lease", "namespaced": True}],
}


def status(code: int, reason: str, message: str) -> MockResponse:
    return MockResponse(
        status=code,
        json_body={
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "reason": reason,
            "message": message,
            "code": code,
        },
    )


class FakeApi:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.rv = 100
        self.fail_next: dict[tuple[str, str], int] = {}
        self.transport = MockTransport(self.handle)
        self.extra_resources: dict[str, list[dict[str, Any]]] = {}
        self.down: set[str] = set()  # resources answering 500 to everything

    def client(self, **kwargs: Any) -> KubeClient:
        return KubeClient.for_server("http://fake", token="t", transport=self.transport, **kwargs)

    def writes(self, method: str | None = None) -> list[HttpRequest]:
        return [r for r in self.transport.requests if r.method != "GET" and (method is None or r.method == method)]

    def handle(self, req: HttpRequest) -> MockResponse:
        path = urlsplit(req.url).path
        resources = {**RESOURCES, **self.extra_resources}
        if path in resources:
            return MockResponse(json_body={"kind": "APIResourceList", "resources": resources[path]})
        parts = path.strip("/").split("/")
        base = parts[:2] if parts[0] == "api" else parts[:3]
        rest = parts[len(base) :]
        if not rest:
            return status(404, "NotFound", "the server could not find the requested resource")
        ns = ""
        if rest and rest[0] == "namespaces" and len(rest) >= 3:
            ns, rest = rest[1], rest[2:]
        resource = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        code = 500 if resource in self.down else self.fail_next.pop((req.method, resource), None)
        if code:
            reasons = {409: "Conflict", 500: "InternalError", 404: "NotFound", 429: "TooManyRequests"}
            return status(code, reasons.get(code, ""), f"injected {code}")
        key = (resource, ns, name)
        body = json.loads(req.body) if req.body else None
        if req.method == "GET" and name:
            obj = self.objects.get(key)
            if obj is None:
                return status(404, "NotFound", f'{resource} "{name}" not found')
            return MockResponse(json_body=obj)
        if req.method == "GET":
            items = sorted(
                (o for (r, n, _), o in self.objects.items() if r == resource and (not ns or n == ns)),
                key=lambda o: o["metadata"]["name"],
            )
            q = req.query()
            start = int(q.get("continue") or 0)
            limit = int(q.get("limit") or 0) or len(items) or 1
            page = items[start : start + limit]
            meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
            if start + limit < len(items):
                meta["continue"] = str(start + limit)
            return MockResponse(json_body={"kind": "List", "metadata": meta, "items": copy.deepcopy(page)})
        if req.method == "POST":
            assert body is not None
            name = body["metadata"]["name"]
            key = (resource, ns, name)
            if key in self.objects:
                return status(409, "AlreadyExists", f'{resource} "{name}" already exists')
            return self._store(key, body)
        if req.method == "PUT":
            assert body is not None
            current = self.objects.get(key)
            if current is None:
                return status(404, "NotFound", f'{resource} "{name}" not found')
            sent_rv = body["metadata"].get("resourceVersion")
            if sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
                return status(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified',
                )
            return self._store(key, body)
        if req.method == "PATCH":
            current = self.objects.get(key)
            if current is None:
                return status(404, "NotFound", f'{resource} "{name}" not found')
            merged = copy.deepcopy(current)
            merged.update(body or {})
            return self._store(key, merged)
        if req.method == "DELETE":
            if self.objects.pop(key, None) is None:
                return status(404, "NotFound", f'{resource} "{name}" not found')
            return MockResponse(json_body={"kind": "Status", "status": "Success"})
        del sub
        return status(405, "MethodNotAllowed", "no")

    def _store(self, key: tuple[str, str, str], obj: dict[str, Any]) -> MockResponse:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        self.objects[key] = obj
        return MockResponse(json_body=copy.deepcopy(obj))
