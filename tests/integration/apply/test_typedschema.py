"""``apply/typedschema.json`` against a real kube-apiserver v1.36 (``make test-real``): the table of the
typed round trip (``apply/typed.py``) says what the server's OpenAPI documents say for every version it
serves. On another minor version, or the embedded server (which publishes no OpenAPI), it is skipped:
the table describes k8s.io/api v0.36, the version upstream's controller links, whatever the cluster runs."""

from __future__ import annotations

from typing import Any

import pytest

from kustomize_controller.apply.typed import _table, builtin_group_version, table_from_openapi

pytestmark = pytest.mark.integration


async def test_the_table_describes_the_versions_the_server_serves(cluster: Any) -> None:
    if cluster.server is not None:
        pytest.skip("the embedded API server publishes no OpenAPI documents (make test-real runs this)")
    async with cluster.session() as http:
        async with http.get("/version") as resp:
            version = (await resp.json(content_type=None))["gitVersion"]
        if not version.startswith("v1.36."):
            pytest.skip(f"the table describes Kubernetes v1.36; the server is {version}")
        async with http.get("/openapi/v3") as resp:
            paths = sorted(p for p in (await resp.json(content_type=None))["paths"] if builtin_group_version(p))
        documents = []
        for path in paths:
            async with http.get(f"/openapi/v3/{path}") as resp:
                documents.append((path, await resp.json(content_type=None)))
    served = table_from_openapi(documents)
    roots, types = _table()
    assert served["roots"], "no built-in kinds served"
    assert {k: roots.get(k) for k in served["roots"]} == served["roots"]
    assert {k: types.get(k) for k in served["types"]} == served["types"]
