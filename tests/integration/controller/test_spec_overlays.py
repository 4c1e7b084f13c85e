"""The Kustomization's own overlays (upstream ``kustomization_transformer_test.go``): namePrefix/Suffix,
patches with targets, images, components and commonMetadata, applied on top of the source's build."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv
from tests.integration.controller.manifests import configmap, deployment

pytestmark = pytest.mark.integration

COMPONENT = """apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
resources:
  - extra.yaml
"""


async def test_spec_overlays(env: ControllerEnv) -> None:
    ns = env.namespace
    artifact = await env.publish({
        "app/cm.yaml": configmap("settings", {"mode": "base"}),
        "app/deploy.yaml": deployment("web"),
        "components/extra/kustomization.yaml": COMPONENT,
        "components/extra/extra.yaml": configmap("extra"),
    })
    await env.start()
    await env.create(env.kustomization(
        path="./app", targetNamespace=ns, namePrefix="pre-", nameSuffix="-suf",
        components=["../components/extra"],
        commonMetadata={"labels": {"team": "blue"}, "annotations": {"owner": "ops"}},
        images=[{"name": "nginx", "newName": "registry.example.com/nginx", "newTag": "1.28"}],
        patches=[{"patch": '[{"op": "add", "path": "/data/patched", "value": "yes"}]',
                  "target": {"kind": "ConfigMap", "name": "settings"}}],
    ))
    obj = await env.wait_ready(revision=artifact["revision"])
    ids = sorted(e["id"] for e in obj["status"]["inventory"]["entries"])
    assert ids == [f"{ns}_pre-extra-suf__ConfigMap", f"{ns}_pre-settings-suf__ConfigMap",
                   f"{ns}_pre-web-suf_apps_Deployment"]
    cm = await env.get("v1", "ConfigMap", "pre-settings-suf")
    assert cm["data"] == {"mode": "base", "patched": "yes"}
    assert cm["metadata"]["labels"]["team"] == "blue"
    assert cm["metadata"]["annotations"]["owner"] == "ops"
    web = await env.get("apps/v1", "Deployment", "pre-web-suf")
    assert web["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example.com/nginx:1.28"
    assert web["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"] == "app"
