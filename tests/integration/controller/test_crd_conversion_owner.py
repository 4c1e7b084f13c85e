"""The CRD's conversion client config survives re-applies of manifests/crd and every mode switch (issue 22).

The controller owns ``spec.conversion`` (``conversion/crd.py``); the manifests' CRD declares none. Here
the controller's write (``ensure_crd``, as its webhook does at start) and ``kubectl apply --server-side``
of ``manifests/crd`` alternate, forced and not: every apply succeeds and leaves exactly one of ``url``
and ``service``, the one the controller last wrote. A CRD that did declare ``service`` (as the manifests
once did) shows why: applied over the controller's ``url`` it is refused, by the embedded server as by
kube-apiserver.
"""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kustomize_controller.api.crdgen import CRD_NAME, build_crd
from kustomize_controller.conversion.crd import FIELD_MANAGER, ensure_crd, get_crd, service_reference
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from tests.conftest import REPO_ROOT, ClusterHandle
from tests.integration.controller.test_old_versions import kubectl

pytestmark = [pytest.mark.integration, pytest.mark.builder]

URL = "https://127.0.0.1:9443/convert"
SERVICE = service_reference("kustomize-controller-webhook", "kustomize-system")


def _ca_pem() -> bytes:
    """A CA certificate: a real kube-apiserver refuses a changed caBundle that holds none."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "conversion-test-ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


CA_PEM = _ca_pem()


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    """A client; the CRD's conversion is put back as it was afterwards (a real cluster shares the CRD)."""
    async with KubeClient(config=await load_kubeconfig(cluster.kubeconfig_path), qps=-1, burst=-1) as kube:
        before = (await get_crd(kube))["spec"].get("conversion") or {"strategy": "None"}
        try:
            yield kube
        finally:
            await kube.patch("apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD_NAME, None,
                             [{"op": "add", "path": "/spec/conversion", "value": before}], patch_type="json")


async def kubectl_apply(cluster: ClusterHandle, *args: str, check: bool = True) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        kubectl(), f"--kubeconfig={cluster.kubeconfig_path}", "apply", "--server-side", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env={**os.environ, "NO_COLOR": "1"})
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=120)
    if check:
        assert proc.returncode == 0, out.decode()
    return proc.returncode or 0, out.decode()


async def controller_writes(client: KubeClient, target: dict[str, Any]) -> None:
    for _ in range(3):  # the webhook retries a conflict the same way
        crd = await get_crd(client)
        if await ensure_crd(client, crd=crd, ca_bundle=CA_PEM, target=target):
            return
    raise AssertionError(f"the controller's write of {target} changed nothing")


async def client_config(client: KubeClient) -> dict[str, Any]:
    crd = await get_crd(client)
    assert crd["spec"]["conversion"]["strategy"] == "Webhook"
    return dict(crd["spec"]["conversion"]["webhook"]["clientConfig"])


async def reapply_manifests(cluster: ClusterHandle) -> None:
    manifests = str(REPO_ROOT / "manifests" / "crd")
    await kubectl_apply(cluster, "-k", manifests)
    await kubectl_apply(cluster, "--force-conflicts", "-k", manifests)


async def test_reapplying_the_manifests_keeps_what_the_controller_wrote_both_ways(
        cluster: ClusterHandle, client: KubeClient) -> None:
    await reapply_manifests(cluster)  # the CRD as a user installs it
    await controller_writes(client, {"url": URL})  # a run out of cluster (--webhook-url)
    await reapply_manifests(cluster)  # an upgrade or a reinstall
    assert await client_config(client) == {"url": URL, "caBundle": base64.b64encode(CA_PEM).decode()}

    await controller_writes(client, {"service": SERVICE})  # back in the cluster: service restored
    config = await client_config(client)
    assert config["service"] == SERVICE and "url" not in config
    await reapply_manifests(cluster)
    assert await client_config(client) == config

    await controller_writes(client, {"url": URL})  # and out again
    await reapply_manifests(cluster)
    config = await client_config(client)
    assert config["url"] == URL and "service" not in config
    managers = {entry["manager"] for entry in (await get_crd(client))["metadata"]["managedFields"]
                if "f:conversion" in entry.get("fieldsV1", {}).get("f:spec", {})}
    assert FIELD_MANAGER in managers


async def test_a_crd_declaring_the_service_cannot_be_applied_over_the_controllers_url(
        cluster: ClusterHandle, client: KubeClient, tmp_path: Path) -> None:
    await controller_writes(client, {"url": URL})
    crd = await get_crd(client)
    declared = {"apiVersion": crd["apiVersion"], "kind": crd["kind"], "metadata": {"name": CRD_NAME},
                "spec": {"group": crd["spec"]["group"], "names": crd["spec"]["names"], "scope": crd["spec"]["scope"],
                         "versions": crd["spec"]["versions"],
                         "conversion": {"strategy": "Webhook", "webhook": {
                             "conversionReviewVersions": ["v1"], "clientConfig": {"service": SERVICE}}}}}
    path = tmp_path / "crd.yaml"
    path.write_text(yaml.safe_dump(declared))
    for force in ((), ("--force-conflicts",)):
        code, out = await kubectl_apply(cluster, *force, "-f", str(path), check=False)
        assert code != 0
        assert "spec.conversion.webhookClientConfig: Required value: exactly one of url or service is required" \
            in out, out
    assert (await client_config(client))["url"] == URL  # refused whole: nothing changed


async def test_the_crd_of_the_earlier_manifests_upgrades_without_losing_the_conversion(
        cluster: ClusterHandle, client: KubeClient, tmp_path: Path) -> None:
    """The manifests once declared the conversion with ``service``: their applier owned it. Once the
    controller has run, applying today's CRD (which declares none) releases those fields, and they stay,
    because the controller co-owns them."""
    earlier = build_crd()
    earlier["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"], "clientConfig": {"service": SERVICE}}}
    path = tmp_path / "crd.yaml"
    path.write_text(yaml.safe_dump(earlier))
    await kubectl_apply(cluster, "--force-conflicts", "-f", str(path))
    await controller_writes(client, {"service": SERVICE})  # caBundle, and the claim
    await reapply_manifests(cluster)
    config = await client_config(client)
    assert config == {"service": SERVICE, "caBundle": base64.b64encode(CA_PEM).decode()}
