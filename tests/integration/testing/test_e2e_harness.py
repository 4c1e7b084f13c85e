"""The e2e harness (``e2e/harness.py``) against the embedded API server, so it cannot rot while the
e2e scenarios themselves run only where a real cluster is given."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from e2e.harness import ControllerProcess, E2EError, Kubectl, Scenario, configmap, eventually, samples
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.testing.artifacts import SOURCE_API_VERSION, ArtifactServer

pytestmark = pytest.mark.integration


@pytest.fixture
async def scenario(cluster: Any, tmp_path: Any) -> AsyncIterator[Scenario]:
    kube = KubeClient(config=await load_kubeconfig(cluster.kubeconfig_path))
    try:
        async with ArtifactServer() as artifacts:
            # the controller is not started here: these tests check the harness, not the controller
            process = ControllerProcess(kubeconfig=cluster.kubeconfig_path, log_path=tmp_path / "c.log",
                                        runtime_namespace=cluster.namespace)
            try:
                kubectl = Kubectl(cluster.kubeconfig_path)
            except E2EError as err:
                pytest.skip(str(err))
            yield Scenario(namespace=cluster.namespace, kube=kube, kubectl=kubectl, artifacts=artifacts,
                           controller=process)
    finally:
        await kube.close()


async def set_ready(scenario: Scenario, name: str, *, status: str, revision: str = "") -> None:
    condition = {"type": "Ready", "status": status, "reason": "ReconciliationSucceeded" if status == "True"
                 else "Progressing", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    await scenario.kube.patch(
        "kustomize.toolkit.fluxcd.io/v1", "Kustomization", name, scenario.namespace,
        # kubectl wait ignores a condition older than the generation (status.observedGeneration defaults to -1)
        {"status": {"conditions": [condition], "lastAppliedRevision": revision or None, "observedGeneration": 1}},
        patch_type="merge", subresource="status",
    )


async def test_publish_and_create_make_valid_objects(scenario: Scenario) -> None:
    artifact = await scenario.publish({"cm.yaml": configmap("settings", level="info", quote="it's \"x\"")})
    source = await scenario.kube.get(SOURCE_API_VERSION, "GitRepository", scenario.source, scenario.namespace)
    assert source["status"]["artifact"]["digest"] == artifact["digest"]
    ks = await scenario.create_kustomization("demo", wait=True, targetNamespace=scenario.namespace)
    assert ks["spec"]["sourceRef"] == {"kind": "GitRepository", "name": scenario.source}
    assert (ks["spec"]["prune"], ks["spec"]["wait"], ks["spec"]["interval"]) == (True, True, "1m")


def test_configmap_helper_is_valid_yaml_for_any_value() -> None:
    from ruamel.yaml import YAML

    doc = YAML(typ="safe").load(configmap("c", a="x: y", b="'quoted' \"twice\"", c="multi\nline"))
    assert doc["data"] == {"a": "x: y", "b": "'quoted' \"twice\"", "c": "multi\nline"}
    assert YAML(typ="safe").load(configmap("empty"))["data"] == {}


async def test_kubectl_wait_ready_and_its_failure_report(scenario: Scenario) -> None:
    await scenario.publish({"cm.yaml": configmap("c")})
    await scenario.create_kustomization("demo")
    await set_ready(scenario, "demo", status="False")
    with pytest.raises(E2EError, match=r"Kustomization/.*/demo: not ready: .*conditions: .*Progressing"):
        await scenario.kubectl.wait_ready("demo", namespace=scenario.namespace, within=1)
    await set_ready(scenario, "demo", status="True", revision="main@sha1:abc")
    ks = await scenario.wait_ready("demo", within=30)
    assert ks["status"]["lastAppliedRevision"] == "main@sha1:abc"
    assert (await scenario.wait_applied("demo", "main@sha1:abc", within=5))["metadata"]["name"] == "demo"


async def test_kubectl_errors_carry_stderr(scenario: Scenario) -> None:
    with pytest.raises(E2EError, match=r"exit 1: .*NotFound|not found"):
        await scenario.kubectl("get", "configmap/none", "-n", scenario.namespace)


async def test_eventually_reports_the_last_value() -> None:
    counter = itertools.count()

    async def probe() -> int:
        return next(counter)

    assert await eventually(probe, lambda v: v >= 3, within=10, what="three", every=0.01) == 3

    async def failing() -> int:
        raise RuntimeError("boom")

    with pytest.raises(E2EError, match=r"never: not reached within 0.05s; last seen: RuntimeError\('boom'\)"):
        await eventually(failing, bool, within=0.05, what="never", every=0.01)


def test_samples_reads_prometheus_exposition() -> None:
    registry = CollectorRegistry()
    reconciles = Counter("controller_runtime_reconcile", "r", ["controller", "result"], registry=registry)
    duration = Histogram("gotk_reconcile_duration_seconds", "d", ["kind", "name", "namespace"], registry=registry)
    reconciles.labels("kustomization", "success").inc(2)
    duration.labels("Kustomization", "basic", "ns").observe(0.3)
    text = generate_latest(registry).decode()
    ok = samples(text, "controller_runtime_reconcile_total", controller="kustomization", result="success")
    assert [s.value for s in ok] == [2.0]
    assert samples(text, "controller_runtime_reconcile_total", controller="other") == []
    hist = samples(text, "gotk_reconcile_duration_seconds", kind="Kustomization", name="basic", namespace="ns")
    assert {s.name for s in hist} == {"gotk_reconcile_duration_seconds_bucket", "gotk_reconcile_duration_seconds_count",
                                      "gotk_reconcile_duration_seconds_sum"}


async def test_controller_process_reports_an_early_exit(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A controller that dies at start-up fails the start with its own output, and stop() is harmless."""
    monkeypatch.setenv("E2E_CONTROLLER_COMMAND", "sh -c 'echo refusing to start >&2; exit 3' --")
    process = ControllerProcess(kubeconfig="/nonexistent", log_path=tmp_path / "c.log", runtime_namespace="ns")
    with pytest.raises(E2EError, match=r"(?s)controller exited with 3.*refusing to start"):
        await process.start(ready_within=30)
    assert await process.stop() == 3
    assert await asyncio.wait_for(process.stop(), 5) == 3
