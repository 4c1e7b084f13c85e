"""A failed build (upstream: BuildFailed before any apply) changes nothing in the cluster: no write, not
even a dry run, to any applied object; the inventory and lastAppliedRevision stay; the failure is
reported as a Warning event and in the history only once a digest exists."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


async def test_build_failure_touches_nothing(env: ControllerEnv) -> None:
    server = env.server
    ns = env.namespace
    first = await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    before = await env.wait_ready(revision=first["revision"])
    versions = {n: (await env.get("v1", "ConfigMap", n))["metadata"]["resourceVersion"] for n in ("a", "b")}
    server.requests.clear()

    broken = await env.publish({"kustomization.yaml": "resources:\n  - missing.yaml\n", "a.yaml": configmap("a")})
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "BuildFailed"))
    assert condition_message(obj, "Ready").startswith("kustomize build failed: ")
    assert condition(obj, "Reconciling") == ("True", "ProgressingWithRetry")
    status = obj["status"]
    assert status["lastAttemptedRevision"] == broken["revision"]
    assert status["lastAppliedRevision"] == first["revision"]
    assert status["inventory"] == before["status"]["inventory"]
    assert status["history"] == before["status"]["history"]

    touched = [r for r in server.requests.select(writes_only=True, include_dry_run=True)
               if r.resource not in ("kustomizations", "events", "gitrepositories")]  # the last: the test's
    assert touched == []
    kustomization_writes = server.requests.writes(resource="kustomizations")
    assert {r.subresource for r in kustomization_writes} == {"status"}
    for name, version in versions.items():
        assert (await env.get("v1", "ConfigMap", name))["metadata"]["resourceVersion"] == version
    event = await env.wait_event(lambda e: e["type"] == "Warning")
    assert event["reason"] == "BuildFailed"
    assert event["message"] == condition_message(obj, "Ready")


async def test_apply_failure_keeps_previous_inventory_plus_what_it_wrote(env: ControllerEnv) -> None:
    """Upstream keeps the previous inventory and so orphans what the failed apply's earlier stages
    created; here those objects stay in it, to be pruned by a later revision without them."""
    ns = env.namespace
    first = await env.publish({"a.yaml": configmap("a")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    before = await env.wait_ready(revision=first["revision"])
    invalid = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\ndata: {k: v}\n"
    role = (f"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: test-{ns}\n"
            "rules: []\n")
    await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b"), "bad.yaml": invalid, "role.yaml": role})
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "ReconciliationFailed"))
    message = condition_message(obj, "Ready")
    assert message.startswith(f"ConfigMap/{ns}/Bad_Name dry-run failed (Invalid): "), message
    # the stage applied before the failure is listed, one line each, as upstream's "%w\n%s"
    assert message.endswith(f"\nClusterRole/test-{ns} created\n"), message
    assert await env.exists("v1", "ConfigMap", "a")
    assert not await env.exists("v1", "ConfigMap", "b")
    assert obj["status"]["inventory"]["entries"] == [
        *before["status"]["inventory"]["entries"],
        {"id": f"_test-{ns}_rbac.authorization.k8s.io_ClusterRole", "v": "v1"}]
    assert obj["status"]["history"][0]["lastReconciledStatus"] == "ReconciliationFailed"


async def test_no_remote_bases_flag(env: ControllerEnv) -> None:
    await env.publish({"kustomization.yaml": "resources:\n  - https://github.com/example/repo//deploy?ref=main\n"})
    await env.start(no_remote_bases=True)
    await env.create(env.kustomization(targetNamespace=env.namespace))
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "BuildFailed"))
    assert "remote bases are disabled" in condition_message(obj, "Ready")
