"""The deployment manifests build with kustomize and are accepted by the API server (server dry-run)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kustomize_controller.conversion.crd import service_reference
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.settings import Settings
from tests.conftest import ClusterHandle

pytestmark = [pytest.mark.integration, pytest.mark.builder]

REPO = Path(__file__).resolve().parents[3]


def build_manifests(path: str = "manifests") -> list[dict]:  # type: ignore[type-arg]
    # the builder installed with the package (the venv's pinned kubectl) before whatever PATH offers
    kubectl = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl") or "kubectl"
    out = subprocess.run([kubectl, "kustomize", str(REPO / path)], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_manifests_contain_what_a_deployment_needs() -> None:
    objects = build_manifests()
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert ("CustomResourceDefinition", "kustomizations.kustomize.toolkit.fluxcd.io") in kinds
    assert ("ServiceAccount", "kustomize-controller") in kinds
    assert ("ClusterRoleBinding", "kustomize-cluster-reconciler") in kinds
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert "--enable-leader-election" in container["args"]
    assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["runAsNonRoot"] is True
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    env = {e["name"]: e for e in container["env"]}
    assert env["RUNTIME_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert {"name": "temp", "mountPath": "/tmp"} in container["volumeMounts"]


@pytest.mark.parametrize("path", ["manifests", "manifests/sharding"])
async def test_manifests_pass_server_side_dry_run(cluster: ClusterHandle, path: str) -> None:
    objects = build_manifests(path)
    config = await load_kubeconfig(cluster.kubeconfig_path)
    async with KubeClient(config=config) as client:
        for obj in objects:
            if obj["kind"] == "Namespace":
                continue
            # Namespaced objects go to the test's namespace so nothing outside it is needed.
            if obj["metadata"].get("namespace"):
                obj["metadata"]["namespace"] = cluster.namespace
            result = await client.apply(obj, field_manager="manifests-test", dry_run=True)
            assert result["kind"] == obj["kind"]


def test_manifests_wire_the_conversion_webhook() -> None:
    objects = build_manifests()
    by_kind = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    crd = by_kind[("CustomResourceDefinition", "kustomizations.kustomize.toolkit.fluxcd.io")]
    # the controller writes spec.conversion (conversion/crd.py): the Service of --webhook-service in its
    # namespace (RUNTIME_NAMESPACE), port 443
    assert "conversion" not in crd["spec"]
    service_ref = service_reference(Settings().webhook_service, "kustomize-system")
    service = by_kind[("Service", service_ref["name"])]
    assert service_ref["namespace"] == service["metadata"]["namespace"]
    assert service_ref["port"] == service["spec"]["ports"][0]["port"]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["RUNTIME_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    ports = {p["name"]: p["containerPort"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert ports[service["spec"]["ports"][0]["targetPort"]] == 9443
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    rules = by_kind[("ClusterRole", "kustomize-manager-role")]["rules"]
    assert {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
            "resourceNames": [crd["metadata"]["name"]], "verbs": ["get", "patch"]} in rules
    role = by_kind[("Role", "kustomize-webhook-cert-role")]
    assert any(r.get("resourceNames") == ["kustomize-controller-webhook-cert"] and "update" in r["verbs"]
               for r in role["rules"])
    binding = by_kind[("RoleBinding", "kustomize-webhook-cert-rolebinding")]
    assert binding["subjects"][0]["namespace"] == deployment["metadata"]["namespace"]
