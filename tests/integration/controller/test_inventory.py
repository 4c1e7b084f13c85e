"""Inventory content (upstream ``kustomization_inventory_test.go``): ids ``<ns>_<name>_<group>_<kind>``
with ``v`` the version, cluster-scoped objects without namespace, ``:`` in RBAC names written as ``__``,
skipped objects included; ``ssa: IfNotPresent`` objects created once and never overwritten."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration

CLUSTER_ROLE = """apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: "flux:test:{ns}"
rules:
  - apiGroups: [""]
    resources: ["configmaps"]
    verbs: ["get"]
"""
NAMESPACE = """apiVersion: v1
kind: Namespace
metadata:
  name: {ns}-extra
"""


async def test_inventory_ids(env: ControllerEnv) -> None:
    ns = env.namespace
    once = configmap("once", {"v": "1"}, annotations={"kustomize.toolkit.fluxcd.io/ssa": "IfNotPresent"})
    ignored = configmap("ignored", annotations={"kustomize.toolkit.fluxcd.io/ssa": "Ignore"})
    first = await env.publish({"role.yaml": CLUSTER_ROLE.format(ns=ns), "ns.yaml": NAMESPACE.format(ns=ns),
                               "cm.yaml": configmap("a"), "once.yaml": once, "ignored.yaml": ignored})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    obj = await env.wait_ready(revision=first["revision"])
    entries = {e["id"]: e["v"] for e in obj["status"]["inventory"]["entries"]}
    assert entries == {
        f"_{ns}__Namespace": "v1",  # kustomize's namespace transformer renames Namespace objects
        f"_flux__test__{ns}_rbac.authorization.k8s.io_ClusterRole": "v1",
        f"{ns}_a__ConfigMap": "v1",
        f"{ns}_once__ConfigMap": "v1",
        f"{ns}_ignored__ConfigMap": "v1",
    }
    assert not await env.exists("v1", "ConfigMap", "ignored")

    once2 = configmap("once", {"v": "2"}, annotations={"kustomize.toolkit.fluxcd.io/ssa": "IfNotPresent"})
    second = await env.publish({"role.yaml": CLUSTER_ROLE.format(ns=ns), "ns.yaml": NAMESPACE.format(ns=ns),
                                "cm.yaml": configmap("a"), "once.yaml": once2, "ignored.yaml": ignored})
    obj = await env.wait_ready(revision=second["revision"])
    assert (await env.get("v1", "ConfigMap", "once"))["data"] == {"v": "1"}
    assert f"{ns}_once__ConfigMap" in {e["id"] for e in obj["status"]["inventory"]["entries"]}
    # inventory order is apply order: definitions (Namespace, ClusterRole) before the rest
    ids = [e["id"] for e in obj["status"]["inventory"]["entries"]]
    assert ids.index(f"_{ns}__Namespace") < ids.index(f"{ns}_a__ConfigMap")
