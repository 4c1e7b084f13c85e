"""``reconcile.fluxcd.io/requestedAt`` (upstream's ``ReconcileRequestedPredicate``): a new token triggers
a reconcile and is mirrored into ``status.lastHandledReconcileAt``; status-only or label-only updates do
not trigger one."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import KS_API, ControllerEnv
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


def total_reconciliations(obj: dict) -> int:  # type: ignore[type-arg]
    return sum(h["totalReconciliations"] for h in obj["status"].get("history", []))


async def test_each_new_token_is_handled_once(env: ControllerEnv) -> None:
    artifact = await env.publish({"cm.yaml": configmap("a")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace))
    obj = await env.wait_ready(revision=artifact["revision"])
    assert "lastHandledReconcileAt" not in obj["status"]
    assert total_reconciliations(obj) == 1

    # a label-only change is not a reason to reconcile
    await env.client.patch(KS_API, "Kustomization", "app", env.namespace,
                           {"metadata": {"labels": {"team": "x"}}}, patch_type="merge")
    first = await env.request_reconcile(token="first")
    obj = await env.wait_handled(first)
    assert total_reconciliations(obj) == 2

    second = await env.request_reconcile(token="second")
    obj = await env.wait_handled(second)
    assert total_reconciliations(obj) == 3
    (entry,) = obj["status"]["history"]
    assert entry["lastReconciledStatus"] == "ReconciliationSucceeded"
