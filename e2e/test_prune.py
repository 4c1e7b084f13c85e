"""Prune on revision change: an object that leaves the source is deleted; the others stay untouched."""

from __future__ import annotations

import pytest

from kustomize_controller.kube.errors import NotFoundError

from .harness import Scenario, configmap, eventually

pytestmark = pytest.mark.timeout(300)


async def test_new_revision_drops_an_object(scenario: Scenario) -> None:
    ns = scenario.namespace
    first = await scenario.publish({
        "kustomization.yaml": "resources:\n- keep.yaml\n- drop.yaml\n",
        "keep.yaml": configmap("keep", v="1"),
        "drop.yaml": configmap("drop", v="1"),
    })
    await scenario.create_kustomization("prune", targetNamespace=ns)
    await scenario.wait_ready("prune")
    kept_before = await scenario.kube.get("v1", "ConfigMap", "keep", ns)
    await scenario.kube.get("v1", "ConfigMap", "drop", ns)

    second = await scenario.publish({
        "kustomization.yaml": "resources:\n- keep.yaml\n",
        "keep.yaml": configmap("keep", v="1"),
    })
    assert second["revision"] != first["revision"]
    ks = await scenario.wait_applied("prune", second["revision"])

    async def drop_gone() -> bool:
        try:
            await scenario.kube.get("v1", "ConfigMap", "drop", ns)
        except NotFoundError:
            return True
        return False

    await eventually(drop_gone, bool, within=60, what=f"ConfigMap/{ns}/drop pruned")
    kept = await scenario.kube.get("v1", "ConfigMap", "keep", ns)
    assert kept["metadata"]["uid"] == kept_before["metadata"]["uid"]
    # an unchanged object is not rewritten by the new revision
    assert kept["metadata"]["resourceVersion"] == kept_before["metadata"]["resourceVersion"]
    assert [e["id"] for e in ks["status"]["inventory"]["entries"]] == [f"{ns}_keep__ConfigMap"]


async def test_prune_disabled_keeps_the_object(scenario: Scenario) -> None:
    ns = scenario.namespace
    await scenario.publish({"kustomization.yaml": "resources:\n- a.yaml\n- b.yaml\n",
                            "a.yaml": configmap("a"), "b.yaml": configmap("b")})
    await scenario.create_kustomization("noprune", prune=False, targetNamespace=ns)
    await scenario.wait_ready("noprune")
    second = await scenario.publish({"kustomization.yaml": "resources:\n- a.yaml\n", "a.yaml": configmap("a")})
    ks = await scenario.wait_applied("noprune", second["revision"])
    assert (await scenario.kube.get("v1", "ConfigMap", "b", ns))["metadata"]["name"] == "b"
    assert [e["id"] for e in ks["status"]["inventory"]["entries"]] == [f"{ns}_a__ConfigMap"]
