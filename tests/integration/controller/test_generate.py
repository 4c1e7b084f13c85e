"""Without a kustomization.yaml the controller generates one (upstream §5.1): every YAML file under the
path, recursively, and each sub-directory that has its own kustomization.yaml as one resource."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv
from tests.integration.controller.manifests import configmap, kustomization

pytestmark = pytest.mark.integration


async def test_plain_yaml_and_subdirectory_kustomizations(env: ControllerEnv) -> None:
    artifact = await env.publish({
        "deploy/top.yaml": configmap("top"),
        "deploy/nested/deeper/plain.yaml": configmap("plain-nested"),
        "deploy/overlay/kustomization.yaml": kustomization("listed.yaml") + "namePrefix: pre-\n",
        "deploy/overlay/listed.yaml": configmap("listed"),
        "deploy/overlay/unlisted.yaml": configmap("unlisted"),
        "deploy/notes.txt": "not yaml\n",
    })
    await env.start()
    await env.create(env.kustomization(path="./deploy", targetNamespace=env.namespace))
    obj = await env.wait_ready(revision=artifact["revision"])

    ns = env.namespace
    ids = sorted(e["id"] for e in obj["status"]["inventory"]["entries"])
    # the overlay is built by its own kustomization.yaml: its prefix applies, its unlisted file is not read
    assert ids == [f"{ns}_plain-nested__ConfigMap", f"{ns}_pre-listed__ConfigMap", f"{ns}_top__ConfigMap"]
    assert not await env.exists("v1", "ConfigMap", "unlisted")
    assert not await env.exists("v1", "ConfigMap", "pre-unlisted")


async def test_existing_kustomization_yaml_is_used_as_is(env: ControllerEnv) -> None:
    artifact = await env.publish({
        "app/kustomization.yaml": kustomization("a.yaml") + "commonLabels:\n  team: blue\n",
        "app/a.yaml": configmap("a"),
        "app/b.yaml": configmap("b"),
    })
    await env.start()
    await env.create(env.kustomization(path="app", targetNamespace=env.namespace))
    await env.wait_ready(revision=artifact["revision"])
    cm = await env.get("v1", "ConfigMap", "a")
    assert cm["metadata"]["labels"]["team"] == "blue"
    assert not await env.exists("v1", "ConfigMap", "b")
