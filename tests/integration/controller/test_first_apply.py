"""The first apply of objects the cluster does not have: each is dry-run before it is read (apply/manager.py,
``ApplyOptions.expected``), although the inventory recorded before the apply already lists it
(reconcile/apply_step.py): that record is for prune, not a sign that the object exists."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


async def test_new_objects_are_dry_run_before_they_are_read(env: ControllerEnv) -> None:
    server = env.server
    artifact = await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace, interval="1h"))
    await env.wait_ready(revision=artifact["revision"])

    for name in ("a", "b"):
        seen = server.requests.select(resource="configmaps", namespace=env.namespace, name=name,
                                      include_dry_run=True)
        assert seen, name
        assert (seen[0].verb, seen[0].dry_run) == ("patch", True), [(r.verb, r.dry_run) for r in seen]
