"""Requests of a no-op apply: one GET and one dry-run per object, no write (the number benchmarks record)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
from tests.integration.apply.conftest import configmap, mark

pytestmark = pytest.mark.integration

N = 50


async def test_noop_apply_of_n_objects_costs_two_requests_per_object(cluster: Any, manager: ResourceManager) -> None:
    ns = cluster.namespace
    server = cluster.require_server()
    objects = [configmap(f"cm-{i:03d}", ns, data={"i": str(i)}) for i in range(N)]
    await manager.apply_all_staged(objects, ApplyOptions())
    before = mark(cluster)
    await manager.apply_all_staged(objects, ApplyOptions())
    records = list(server.requests)[before:]
    kinds = Counter(
        "dry-run" if r.dry_run else ("write" if r.is_write else r.verb) for r in records if r.resource == "configmaps"
    )
    assert kinds == {"get": N, "dry-run": N}
    assert len(records) == 2 * N  # discovery is cached: nothing else was asked
