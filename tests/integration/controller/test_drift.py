"""Drift correction (upstream ``kustomization_force_test``/drift e2e): an out-of-band edit of a field the
controller applied is reverted by the next reconcile, here triggered with ``requestedAt``; fields only
another manager owns are left alone."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv, condition
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


async def test_out_of_band_edit_is_reverted_on_requested_reconcile(env: ControllerEnv) -> None:
    ns = env.namespace
    artifact = await env.publish({"cm.yaml": configmap("settings", {"mode": "safe"})})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    await env.wait_ready(revision=artifact["revision"])

    # kubectl-style edit of a field we own, plus a label only the editor owns
    await env.client.patch("v1", "ConfigMap", "settings", ns,
                           {"data": {"mode": "unsafe"}, "metadata": {"labels": {"edited-by": "human"}}},
                           patch_type="merge", field_manager="kubectl-edit")
    assert (await env.get("v1", "ConfigMap", "settings"))["data"]["mode"] == "unsafe"

    token = await env.request_reconcile()
    obj = await env.wait_handled(token)
    assert obj["status"]["lastHandledReconcileAt"] == token
    assert condition(obj, "Ready") == ("True", "ReconciliationSucceeded")

    cm = await env.get("v1", "ConfigMap", "settings")
    assert cm["data"] == {"mode": "safe"}
    # kubectl managers are taken over (upstream cleanup), so its label is removed too
    assert "edited-by" not in cm["metadata"].get("labels", {})
    event = await env.wait_event(lambda e: e.get("message") == f"ConfigMap/{ns}/settings configured")
    assert event["reason"] == "Progressing"


async def test_fields_of_other_managers_survive(env: ControllerEnv) -> None:
    ns = env.namespace
    artifact = await env.publish({"cm.yaml": configmap("settings", {"mode": "safe"})})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    await env.wait_ready(revision=artifact["revision"])
    await env.client.patch("v1", "ConfigMap", "settings", ns, {"data": {"extra": "x"}},
                           patch_type="merge", field_manager="some-operator")
    token = await env.request_reconcile()
    await env.wait_handled(token)
    cm = await env.get("v1", "ConfigMap", "settings")
    assert cm["data"] == {"mode": "safe", "extra": "x"}
