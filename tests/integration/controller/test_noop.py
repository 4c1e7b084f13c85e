"""A periodic reconcile of an unchanged Kustomization writes nothing but its own status: every object is
read, none is applied, no metadata cleanup patch. The objects the first reconcile wrote are remembered as
that apply left them (apply/verified.py), so no dry-run is needed while nobody else wrote them."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv
from tests.integration.controller.manifests import configmap, deployment

pytestmark = pytest.mark.integration


async def test_unchanged_kustomization_writes_only_its_status(env: ControllerEnv) -> None:
    server = env.server
    ns = env.namespace
    # defaults and canonical quantities appear in the live objects (as on a real server): the dry-runs
    # answer them too, so none of this is drift
    heavy = deployment("heavy").replace("          image: nginx:1.27\n", "          image: nginx:1.27\n"
                                        "          resources:\n            limits: {cpu: '1.5', memory: 1024Mi}\n"
                                        "            requests: {cpu: 1000m, memory: 2048Ki}\n")
    service = ("apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector: {app: web}\n"
               "  ports:\n    - port: 80\n")
    artifact = await env.publish({"cm.yaml": configmap("a"), "deploy.yaml": deployment("web"),
                                  "heavy.yaml": heavy, "svc.yaml": service,
                                  "sa.yaml": "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa\n"})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, interval="2s", retryInterval="2s"))
    first = await env.wait_ready(revision=artifact["revision"])
    digest = first["status"]["history"][0]["digest"]
    server.requests.clear()

    # two more periodic runs (the interval is 2 s); counted through the history, never through time
    await env.wait_for("app", lambda o: o["status"]["history"][0]["totalReconciliations"] >= 3, within=60)

    writes = server.requests.select(writes_only=True)
    others = [(w.verb, w.resource, w.name) for w in writes if w.resource not in ("kustomizations", "events")]
    assert others == []
    assert {(w.verb, w.subresource) for w in writes if w.resource == "kustomizations"} == {("patch", "status")}
    dry_runs = server.requests.select(writes_only=True, include_dry_run=True)
    assert not [w for w in dry_runs if w.dry_run and w.resource != "kustomizations"]
    reads = {r.resource for r in server.requests.select(verb="get")}
    assert reads >= {"configmaps", "deployments", "serviceaccounts", "services"}
    live = await env.get("apps/v1", "Deployment", "heavy")
    assert live["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "1500m", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "2Mi"}}
    obj = await env.get_ks()
    assert obj["status"]["history"][0]["digest"] == digest
    assert len(obj["status"]["history"]) == 1


async def test_a_periodic_reconcile_reads_a_large_group_with_one_list(env: ControllerEnv) -> None:
    """16 or more objects of one kind in one namespace are read with one list of their metadata, selected by
    the owner labels, instead of a GET each (apply/plan.py); an edit of one of them is still reverted."""
    server = env.server
    ns = env.namespace
    files = {f"cm-{i:02d}.yaml": configmap(f"cm-{i:02d}") for i in range(20)}
    artifact = await env.publish(files)
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, interval="2s", retryInterval="2s"))
    await env.wait_ready(revision=artifact["revision"])
    await env.wait_for("app", lambda o: o["status"]["history"][0]["totalReconciliations"] >= 2, within=60)
    server.requests.clear()
    await env.wait_for("app", lambda o: o["status"]["history"][0]["totalReconciliations"] >= 4, within=60)
    config_reads = [r for r in server.requests.select() if r.resource == "configmaps" and r.verb in ("get", "list")
                    and r.namespace == ns]
    lists = [r for r in config_reads if r.verb == "list"]
    assert lists and "labelSelector=" in lists[0].query
    assert [r for r in config_reads if r.verb == "get"] == []

    await env.client.patch("v1", "ConfigMap", "cm-07", ns, {"data": {"key": "edited"}}, patch_type="merge",
                           field_manager="kubectl-edit")
    await env.wait_for("app", lambda o: o["status"]["history"][0]["totalReconciliations"] >= 6, within=60)
    assert (await env.get("v1", "ConfigMap", "cm-07"))["data"] == {"key": "value"}
