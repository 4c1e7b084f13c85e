"""``spec.suspend`` (upstream ``kustomization_suspend`` behaviour): nothing is applied, no event, no
condition change while suspended, ``lastHandledReconcileAt`` still follows requests; resuming applies
the latest revision."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv
from tests.integration.controller.manifests import configmap

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("wait_mode")]  # both health-wait modes


async def test_suspend_and_resume(env: ControllerEnv) -> None:
    ns = env.namespace
    first = await env.publish({"cm.yaml": configmap("a", {"v": "1"})})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    await env.wait_ready(revision=first["revision"])
    await env.patch_spec({"suspend": True})
    # upstream's finalizeStatus: still Ready=True, so the suspended generation counts as observed
    before = await env.wait_for("app", lambda o: o["status"].get("observedGeneration") == 2)
    events_before = len(await env.events())

    second = await env.publish({"cm.yaml": configmap("a", {"v": "2"})})
    token = await env.request_reconcile()
    obj = await env.wait_handled(token)
    assert obj["status"]["lastAppliedRevision"] == first["revision"]
    assert obj["status"]["lastAttemptedRevision"] == first["revision"]
    assert obj["status"]["conditions"] == before["status"]["conditions"]
    assert (await env.get("v1", "ConfigMap", "a"))["data"] == {"v": "1"}
    assert len(await env.events()) == events_before

    await env.patch_spec({"suspend": False})
    await env.wait_ready(revision=second["revision"])
    assert (await env.get("v1", "ConfigMap", "a"))["data"] == {"v": "2"}
