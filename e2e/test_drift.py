"""Drift correction: an out-of-band ``kubectl`` edit is reverted by the next reconcile, here asked for
with ``reconcile.fluxcd.io/requestedAt`` (what ``flux reconcile`` does)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from .harness import Scenario, configmap, eventually

pytestmark = pytest.mark.timeout(300)


async def request_reconcile(scenario: Scenario, name: str) -> str:
    token = datetime.now(UTC).isoformat()
    await scenario.kubectl("annotate", "--overwrite", f"kustomization/{name}", "-n", scenario.namespace,
                           f"reconcile.fluxcd.io/requestedAt={token}")
    return token


async def handled(scenario: Scenario, name: str, token: str) -> dict[str, Any]:
    return await eventually(
        lambda: scenario.kustomization(name),
        lambda ks: (ks.get("status") or {}).get("lastHandledReconcileAt") == token,
        within=120,
        what=f"Kustomization/{scenario.namespace}/{name} handled requestedAt={token}",
    )


async def test_out_of_band_edit_is_reverted(scenario: Scenario) -> None:
    ns = scenario.namespace
    await scenario.publish({"kustomization.yaml": "resources:\n- cm.yaml\n",
                            "cm.yaml": configmap("settings", level="info")})
    await scenario.create_kustomization("drift", targetNamespace=ns)
    await scenario.wait_ready("drift")

    patch = json.dumps({"data": {"level": "debug", "extra": "added by hand"}})
    await scenario.kubectl("patch", "configmap/settings", "-n", ns, "--type=merge", "-p", patch)
    # a field set by another tool (not a kubectl* manager) is that tool's business and stays
    await scenario.kube.patch("v1", "ConfigMap", "settings", ns, {"data": {"operator": "owned elsewhere"}},
                              patch_type="merge", field_manager="e2e-operator")
    edited = await scenario.kube.get("v1", "ConfigMap", "settings", ns)
    assert edited["data"]["level"] == "debug"

    token = await request_reconcile(scenario, "drift")
    ks = await handled(scenario, "drift", token)
    ready = next(c for c in ks["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    reverted = await scenario.kube.get("v1", "ConfigMap", "settings", ns)
    # kubectl* managers' fields are taken over and re-applied from the source: the edit is reverted and the
    # key the source never had is gone; the other manager's key stays (upstream's managed-fields cleanup)
    assert reverted["data"] == {"level": "info", "operator": "owned elsewhere"}


async def test_deleted_object_is_recreated(scenario: Scenario) -> None:
    ns = scenario.namespace
    await scenario.publish({"kustomization.yaml": "resources:\n- cm.yaml\n", "cm.yaml": configmap("settings")})
    await scenario.create_kustomization("recreate", targetNamespace=ns)
    await scenario.wait_ready("recreate")
    before = await scenario.kube.get("v1", "ConfigMap", "settings", ns)
    await scenario.kubectl("delete", "configmap/settings", "-n", ns)

    token = await request_reconcile(scenario, "recreate")
    await handled(scenario, "recreate", token)
    after = await scenario.kube.get("v1", "ConfigMap", "settings", ns)
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
