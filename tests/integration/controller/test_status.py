"""Status as kstatus readers see it (upstream §2, §3, §5.13): the progress messages patched as a reconcile
advances, the final conditions, the status owner, and status writes that survive conflicts and errors."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.integration.controller.conftest import ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


def squash(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if not out or out[-1] != value:
            out.append(value)
    return out


def condition_time(obj: dict[str, Any], type_: str) -> str:
    found = [c for c in obj["status"]["conditions"] if c["type"] == type_]
    return str(found[0]["lastTransitionTime"])


def cond(obj: dict[str, Any], type_: str) -> tuple[str, str, str] | None:
    found = condition(obj, type_)
    return (*found, condition_message(obj, type_)) if found else None


async def test_progress_messages_in_order(env: ControllerEnv) -> None:
    """With ``--progress-status-delay=0s`` every progress state is written, as upstream."""
    ns = env.namespace
    artifact = await env.publish({"cm.yaml": configmap("a")})
    rev = artifact["revision"]
    await env.create(env.kustomization(targetNamespace=ns, healthChecks=[
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "namespace": ns}]))
    async with env.versions() as seen:
        await env.start(progress_status_delay=timedelta(0))
        await env.wait_ready(revision=rev)
    reconciling = squash([cond(o, "Reconciling") for o in seen if cond(o, "Reconciling")])
    timeout = "9m30s"  # interval (10m) minus 30 s
    assert [m for _, _, m in reconciling] == [
        f"Fetching manifests for revision {rev} with a timeout of {timeout}",
        f"Building manifests for revision {rev} with a timeout of {timeout}",
        f"Detecting drift for revision {rev} with a timeout of {timeout}",
        f"Running health checks for revision {rev} with a timeout of {timeout}",
    ]
    assert {(s, r) for s, r, _ in reconciling} == {("True", "Progressing")}
    ready = squash([cond(o, "Ready") for o in seen if cond(o, "Ready")])
    assert ready == [("Unknown", "Progressing", "Reconciliation in progress"),
                     ("True", "ReconciliationSucceeded", f"Applied revision: {rev}")]
    # the finalizer comes first, in its own write, before any status
    assert "finalizers.fluxcd.io" in seen[0]["metadata"].get("finalizers", [])
    assert not (seen[0].get("status") or {}).get("conditions")
    final = seen[-1]
    assert final["status"]["observedGeneration"] == final["metadata"]["generation"]
    assert [c["type"] for c in final["status"]["conditions"]] == ["Ready", "Healthy"]
    status_writes = env.server.requests.writes(resource="kustomizations")
    assert {r.field_manager for r in status_writes if r.subresource == "status"} == {"gotk-kustomize-controller"}


async def test_status_write_conflicts_and_errors_are_retried(env: ControllerEnv) -> None:
    server = env.server
    artifact = await env.publish({"cm.yaml": configmap("a")})
    await env.create(env.kustomization(targetNamespace=env.namespace))
    conflicts = server.faults.fail(method="PATCH", path=r"/kustomizations/app/status", status=409, count=3)
    errors = server.faults.fail(method="PATCH", path=r"/kustomizations/app/status", status=500, count=6)
    await env.start()
    obj = await env.wait_ready(revision=artifact["revision"])
    assert condition(obj, "Ready") == ("True", "ReconciliationSucceeded")
    # all injected failures were consumed: 3 conflicts, then more 500s than one write's 5 attempts (the
    # reconcile fails and is retried with backoff), and the status still converges
    assert (conflicts.hits, errors.hits) == (3, 6)


async def test_message_is_capped(env: ControllerEnv) -> None:
    # a 40,000-character error: the substitution error quotes the variable name
    name = "v" + "x" * 40_000
    await env.publish({"cm.yaml": configmap("a", {"k": "${" + name + "}"})})
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace, postBuild={"substitute": {"other": "1"}}))
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "BuildFailed"))
    message = condition_message(obj, "Ready")
    assert len(message) == 32768
    assert message.endswith("...")


async def test_observed_generation_moves_only_on_success(env: ControllerEnv) -> None:
    artifact = await env.publish({"app/cm.yaml": configmap("a")})
    await env.start()
    await env.create(env.kustomization(path="./app", targetNamespace=env.namespace))
    obj = await env.wait_ready(revision=artifact["revision"])
    assert obj["status"]["observedGeneration"] == 1
    await env.patch_spec({"path": "./nowhere"})
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "ArtifactFailed"))
    assert obj["metadata"]["generation"] == 2
    assert obj["status"]["observedGeneration"] == 1  # kstatus: the new generation is not reconciled yet
    assert {c["observedGeneration"] for c in obj["status"]["conditions"]} == {2}
    assert condition(obj, "Reconciling") == ("True", "ProgressingWithRetry")
    assert condition_message(obj, "Reconciling").startswith("Fetching manifests for revision ")
    await env.patch_spec({"path": "./app"})
    obj = await env.wait_for("app", lambda o: o["status"].get("observedGeneration") == 3)
    assert condition(obj, "Ready") == ("True", "ReconciliationSucceeded")
    assert condition(obj, "Reconciling") is None


async def test_reverifying_an_applied_revision_writes_only_the_final_status(env: ControllerEnv) -> None:
    ns = env.namespace
    artifact = await env.publish({"cm.yaml": configmap("a")})
    rev = artifact["revision"]
    await env.create(env.kustomization(targetNamespace=ns, healthChecks=[
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "namespace": ns}]))
    await env.start()
    before = await env.wait_ready(revision=rev)
    async with env.versions() as seen:
        token = await env.request_reconcile()
        await env.wait_handled(token)
    # the driver's annotation write, then one status write carrying the whole result
    status_versions = [o for o in seen if o.get("status") != before.get("status")]
    assert len(status_versions) == 1, [cond(o, "Reconciling") for o in seen]
    final = status_versions[0]
    assert final["status"]["lastHandledReconcileAt"] == token
    assert cond(final, "Ready") == ("True", "ReconciliationSucceeded", f"Applied revision: {rev}")
    assert cond(final, "Healthy") is not None and cond(final, "Healthy")[0] == "True"  # type: ignore[index]
    assert cond(final, "Reconciling") is None
    assert all(cond(o, "Ready") is not None and cond(o, "Ready")[0] == "True" for o in seen)  # type: ignore[index]
    # upstream's final document: Ready went through Unknown in memory, so its transition time moved
    assert condition_time(final, "Ready") >= condition_time(before, "Ready")


async def test_reverifying_publishes_progress_again_once_drift_was_corrected(env: ControllerEnv) -> None:
    ns = env.namespace
    artifact = await env.publish({"cm.yaml": configmap("a", {"key": "value"})})
    rev = artifact["revision"]
    await env.create(env.kustomization(targetNamespace=ns, healthChecks=[
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "namespace": ns}]))
    await env.start(progress_status_delay=timedelta(0))
    await env.wait_ready(revision=rev)
    await env.client.patch("v1", "ConfigMap", "a", ns, {"data": {"key": "edited"}}, patch_type="merge")
    async with env.versions() as seen:
        token = await env.request_reconcile()
        await env.wait_handled(token)
    assert (await env.get("v1", "ConfigMap", "a"))["data"] == {"key": "value"}  # drift reverted
    timeout = "9m30s"
    reconciling = squash([cond(o, "Reconciling") for o in seen if cond(o, "Reconciling")])
    # fetching, building and drift detection stayed in memory; the health check of the corrected
    # object is published as upstream publishes it
    assert [m for _, _, m in reconciling] == [f"Running health checks for revision {rev} with a timeout of {timeout}"]
    ready = squash([cond(o, "Ready") for o in seen if cond(o, "Ready")])
    assert ready == [("True", "ReconciliationSucceeded", f"Applied revision: {rev}"),
                     ("Unknown", "Progressing", "Reconciliation in progress"),
                     ("True", "ReconciliationSucceeded", f"Applied revision: {rev}")]


async def test_a_failure_while_reverifying_is_written(env: ControllerEnv) -> None:
    ns = env.namespace
    artifact = await env.publish({"cm.yaml": configmap("a", {"key": "${greeting}"})})
    rev = artifact["revision"]
    await env.client.create({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "vars", "namespace": ns}, "data": {"greeting": "hi"}})
    await env.create(env.kustomization(targetNamespace=ns, postBuild={
        "substituteFrom": [{"kind": "ConfigMap", "name": "vars"}]}))
    await env.start()
    await env.wait_ready(revision=rev)
    # same revision and generation, but the substitution source is gone: the failure is published
    await env.client.delete("v1", "ConfigMap", "vars", ns)
    token = await env.request_reconcile()
    obj = await env.wait_handled(token)
    ready = cond(obj, "Ready")
    assert ready is not None and ready[0] == "False" and "vars" in ready[2], ready
    assert (await env.get("v1", "ConfigMap", "a"))["data"] == {"key": "hi"}  # nothing applied is lost


async def test_a_quick_reconcile_writes_only_its_final_status(env: ControllerEnv) -> None:
    """A first reconcile that ends before ``--progress-status-delay`` (30 s here, so that a loaded machine
    cannot make it slower than the delay) goes from no status straight to Ready=True: one status write,
    no Ready=Unknown, no Reconciling messages."""
    ns = env.namespace
    artifact = await env.publish({"cm.yaml": configmap("a")})
    rev = artifact["revision"]
    await env.create(env.kustomization(targetNamespace=ns))
    async with env.versions() as seen:
        await env.start(progress_status_delay=timedelta(seconds=30))
        await env.wait_ready(revision=rev)
    assert [cond(o, "Ready") for o in seen if cond(o, "Ready")] == [
        ("True", "ReconciliationSucceeded", f"Applied revision: {rev}")]
    assert not [o for o in seen if cond(o, "Reconciling")]
    if env.cluster.server is not None:
        patches = [r for r in env.server.requests.writes(resource="kustomizations") if r.verb == "patch"]
        # the finalizer, the inventory recorded before the apply (alone), the final status
        assert [r.subresource for r in patches] == ["", "status", "status"]


async def test_a_slow_reconcile_publishes_its_progress_once_the_delay_passed(env: ControllerEnv) -> None:
    ns = env.namespace
    artifact = await env.publish({"cm.yaml": configmap("a")})
    rev = artifact["revision"]
    # the dry-run of the ConfigMap takes 3 s: the reconcile is still in drift detection when 2 s passed
    env.server.faults.delay(3.0, method="PATCH", path=r"/configmaps/a$", count=1)
    await env.create(env.kustomization(targetNamespace=ns))
    async with env.versions() as seen:
        await env.start()
        await env.wait_ready(revision=rev)
    ready = squash([cond(o, "Ready") for o in seen if cond(o, "Ready")])
    assert ready == [("Unknown", "Progressing", "Reconciliation in progress"),
                     ("True", "ReconciliationSucceeded", f"Applied revision: {rev}")]
    reconciling = squash([cond(o, "Reconciling") for o in seen if cond(o, "Reconciling")])
    assert [m for _, _, m in reconciling] == [f"Detecting drift for revision {rev} with a timeout of 9m30s"]
