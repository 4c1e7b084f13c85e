"""Source kinds (upstream ``kustomization_origin_revision_test.go``, ``_externalartifact_test.go``):
OCIRepository with its origin revision, Bucket, and ExternalArtifact behind its feature gate."""

from __future__ import annotations

import pytest

from kustomize_controller.settings import FEATURE_GATE_DEFAULTS, FeatureGates
from tests.integration.controller.conftest import ControllerEnv
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration

ORIGIN = "org.opencontainers.image.revision"


async def test_oci_repository_origin_revision(env: ControllerEnv) -> None:
    origin = "main@sha1:0123456789abcdef0123456789abcdef01234567"
    artifact = await env.publish({"cm.yaml": configmap("a")}, kind="OCIRepository", name="oci",
                                 revision="latest@sha256:" + "a" * 64, metadata={ORIGIN: origin})
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace,
                                       sourceRef={"kind": "OCIRepository", "name": "oci"}))
    obj = await env.wait_ready(revision=artifact["revision"])
    assert obj["status"]["lastAppliedOriginRevision"] == origin
    assert obj["status"]["history"][0]["metadata"] == {"revision": artifact["revision"], "originRevision": origin}
    finished = await env.wait_event(lambda e: e["message"].startswith("Reconciliation finished"))
    annotations = finished["metadata"]["annotations"]
    assert annotations["kustomize.toolkit.fluxcd.io/originRevision"] == origin


async def test_bucket(env: ControllerEnv) -> None:
    artifact = await env.publish({"cm.yaml": configmap("a")}, kind="Bucket", name="bucket")
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace, sourceRef={"kind": "Bucket", "name": "bucket"}))
    await env.wait_ready(revision=artifact["revision"])
    assert await env.exists("v1", "ConfigMap", "a")


async def test_external_artifact_with_its_gate(env: ControllerEnv) -> None:
    artifact = await env.publish({"cm.yaml": configmap("a")}, kind="ExternalArtifact", name="ext")
    await env.start(feature_gates=FeatureGates(values={**FEATURE_GATE_DEFAULTS, "ExternalArtifact": True}))
    await env.create(env.kustomization(targetNamespace=env.namespace,
                                       sourceRef={"kind": "ExternalArtifact", "name": "ext"}))
    await env.wait_ready(revision=artifact["revision"])
    update = await env.publish({"cm.yaml": configmap("a", {"v": "2"})}, kind="ExternalArtifact", name="ext")
    await env.wait_ready(revision=update["revision"])  # watched like the other kinds
