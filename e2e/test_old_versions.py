"""Old API versions on a real cluster: seed Kustomizations applied unchanged with kubectl get Ready.

The API server calls the controller's conversion webhook at ``--webhook-url``, which the harness points
at ``E2E_WEBHOOK_HOST`` (default ``127.0.0.1``: right for the embedded server or a local kube-apiserver;
for kind, the host's address on the kind network). The seeds used here live in the test's namespace
and need no node (no Deployment must become available); the others run against the embedded server
in ``tests/integration/controller/test_old_versions.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from kustomize_controller.testing.artifacts import publish_source

from .harness import Scenario, eventually

pytestmark = pytest.mark.timeout(300)

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "reference" / "seed-kustomizations"
GROUP = "kustomize.toolkit.fluxcd.io"
CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition", f"kustomizations.{GROUP}")


async def conversion_ready(scenario: Scenario) -> None:
    """Skip on a CRD without the old versions; wait until it calls this test's controller."""
    crd = await scenario.kube.get(*CRD)
    if len(crd["spec"]["versions"]) < 2:
        pytest.skip("the cluster's Kustomization CRD serves v1 only (installed before; the harness never "
                    "changes an existing CRD)")
    port = str(scenario.controller.webhook_port)
    await eventually(lambda: scenario.kube.get(*CRD),
                     lambda c: f":{port}/" in str(c["spec"]["conversion"]["webhook"]["clientConfig"].get("url")),
                     within=60, what="the CRD's conversion url pointing at this controller")


async def publish(scenario: Scenario, name: str, files: dict[str, str], kind: str = "GitRepository",
                  namespace: str | None = None) -> None:
    namespace = namespace or scenario.namespace
    artifact = await scenario.artifacts.publish_files(files, name=f"{kind.lower()}/{namespace}/{name}")
    await publish_source(scenario.kube, kind=kind, namespace=namespace, name=name, artifact=artifact)


def configmap(name: str, namespace: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\ndata:\n  a: b\n"


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in YAML(typ="safe", pure=True).load_all(path.read_text()) if d]


async def apply_and_wait(scenario: Scenario, seed: str) -> None:
    ns = scenario.namespace
    out = await scenario.kubectl("apply", "-n", ns, "-f", str(SEEDS / seed))
    assert "configured" in out or "created" in out, out
    for doc in documents(SEEDS / seed):
        version = doc["apiVersion"].rpartition("/")[2]
        resource = f"kustomizations.{version}.{GROUP}/{doc['metadata']['name']}"
        await scenario.kubectl("wait", resource, "-n", ns, "--for=condition=ready", "--timeout=120s", within=150)
        back = json.loads(await scenario.kubectl("get", resource, "-n", ns, "-o", "json"))
        for key, value in doc["spec"].items():  # nothing the file wrote is lost
            assert back["spec"].get(key) == value, (key, back["spec"])


async def test_v1alpha1_depends_on(scenario: Scenario) -> None:
    await conversion_ready(scenario)
    ns = scenario.namespace
    await publish(scenario, "webapp", {"webapp/common/cm.yaml": configmap("common", ns),
                                       "webapp/backend/cm.yaml": configmap("backend", ns)})
    await apply_and_wait(scenario, "v1alpha1-depends-on.yaml")
    stored = await scenario.kube.get(f"{GROUP}/v1", "Kustomization", "backend", ns)
    assert stored["spec"]["dependsOn"] == [{"name": "common"}]


async def test_v1alpha1_decryption(scenario: Scenario) -> None:
    await conversion_ready(scenario)
    ns = scenario.namespace
    await scenario.kube.create({"apiVersion": "v1", "kind": "Secret",
                                "metadata": {"name": "sops-pgp", "namespace": ns}})
    await publish(scenario, "my-secrets", {"cm.yaml": configmap("plain", ns)})
    await apply_and_wait(scenario, "v1alpha1-decryption.yaml")


# the source is in another namespace: a controller that watches only its own would never see it
@pytest.mark.controller_args("--watch-all-namespaces=true")
async def test_v1_bucket_in_another_namespace(scenario: Scenario) -> None:
    await conversion_ready(scenario)
    ns = scenario.namespace
    await publish(scenario, "kustomizebucket", {"cm.yaml": configmap("from-bucket", ns)}, kind="Bucket",
                  namespace="default")
    try:
        await apply_and_wait(scenario, "v1-bucket.yaml")
    finally:
        await scenario.kubectl("delete", "buckets.source.toolkit.fluxcd.io", "kustomizebucket", "-n", "default",
                               "--ignore-not-found", "--wait=false")
