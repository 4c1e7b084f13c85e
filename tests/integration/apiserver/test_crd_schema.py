"""Custom resources are pruned, defaulted and validated against their CRD's structural schema."""

from __future__ import annotations

import pytest

from .helpers import APPLY, MERGE, call

pytestmark = pytest.mark.integration

KS = "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{ns}/kustomizations"


def kustomization(name: str, **spec) -> dict:
    return {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": {"name": name},
            "spec": {"interval": "5m", "prune": True, "sourceRef": {"kind": "GitRepository", "name": "repo"},
                     **spec}}


async def test_unknown_fields_are_pruned_and_defaults_applied(cluster):
    async with cluster.session() as http:
        body = kustomization("k1", notAField="x")
        body["topLevelJunk"] = 1
        status, obj = await call(http, "POST", KS.format(ns=cluster.namespace), body=body)
        assert status == 201, obj
        assert "notAField" not in obj["spec"]
        assert "topLevelJunk" not in obj
        assert obj["spec"]["force"] is False
        assert obj["status"] == {"observedGeneration": -1}


async def test_schema_violations_are_422(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        status, body = await call(http, "POST", KS.format(ns=ns), body=kustomization("k2", interval=5))
        assert (status, body["reason"]) == (422, "Invalid")
        assert body["details"]["causes"][0]["field"] == "spec.interval"
        assert body["message"].startswith('Kustomization.kustomize.toolkit.fluxcd.io "k2" is invalid: ')

        missing = kustomization("k3")
        del missing["spec"]["sourceRef"]
        status, body = await call(http, "POST", KS.format(ns=ns), body=missing)
        assert status == 422
        assert "spec.sourceRef" in [c["field"] for c in body["details"]["causes"]]


async def test_cel_rules_are_enforced(cluster):
    ns = cluster.namespace
    both = kustomization("k4", kubeConfig={"secretRef": {"name": "a"}, "configMapRef": {"name": "b"}})
    async with cluster.session() as http:
        status, body = await call(http, "POST", KS.format(ns=ns), body=both)
        assert (status, body["reason"]) == (422, "Invalid")
        assert "exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef" in body["message"]
        status, _ = await call(http, "POST", KS.format(ns=ns), body=kustomization("k5"))
        assert status == 201
        status, body = await call(http, "PATCH", KS.format(ns=ns) + "/k5", content_type=MERGE,
                                  body={"spec": {"kubeConfig": {}}})
        assert status == 422


async def test_field_validation_modes(cluster):
    ns = cluster.namespace
    path = KS.format(ns=ns)
    async with cluster.session() as http:
        status, body = await call(http, "POST", path, body=kustomization("s1", bogus=1),
                                  params={"fieldValidation": "Strict"})
        assert (status, body["reason"]) == (400, "BadRequest")
        assert 'strict decoding error: unknown field "spec.bogus"' in body["message"]
        async with http.post(path, json=kustomization("s2", bogus=1)) as resp:
            assert resp.status == 201
            assert 'unknown field \\"spec.bogus\\"' in resp.headers.get("Warning", "")
        status, _ = await call(http, "POST", path, body=kustomization("s3", bogus=1),
                               params={"fieldValidation": "Ignore"})
        assert status == 201


async def test_apply_with_undeclared_field_is_rejected(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        status, body = await call(http, "PATCH", KS.format(ns=ns) + "/a1", body=kustomization("a1", bogus=1),
                                  content_type=APPLY, params={"fieldManager": "m"})
        assert status == 500 and not body.get("reason")  # a plain error on a real server too
        # the message names the configuration as sent: no namespace in it, so none in the message
        assert body["message"].startswith("failed to create typed patch object (/a1; "
                                          "kustomize.toolkit.fluxcd.io/v1, Kind=Kustomization): ")
        assert body["message"].endswith(".spec.bogus: field not declared in schema")
