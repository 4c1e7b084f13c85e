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
    artifact = await env.publish({"cm.yaml": configmap("a"), "deploy.yaml": deployment("web"),
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
    assert reads >= {"configmaps", "deployments", "serviceaccounts"}
    obj = await env.get_ks()
    assert obj["status"]["history"][0]["digest"] == digest
    assert len(obj["status"]["history"]) == 1
