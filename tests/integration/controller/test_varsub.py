"""Post-build substitution (upstream ``kustomization_varsub_test.go``): ``substituteFrom`` ConfigMaps and
Secrets in order (later wins), inline ``substitute`` over all, optional references may be missing, a
required one may not, and ``substitute: disabled`` opts a resource out."""

from __future__ import annotations

import base64

import pytest

from tests.integration.controller.conftest import ControllerEnv, condition, condition_message

pytestmark = pytest.mark.integration

TEMPLATE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: rendered
data:
  region: ${region}
  tier: ${tier:=default-tier}
  secret: ${password}
  inline: ${inline}
  escaped: $${kept}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: untouched
  annotations:
    kustomize.toolkit.fluxcd.io/substitute: disabled
data:
  raw: ${region}
"""


async def test_substitute_from_configmap_secret_and_inline(env: ControllerEnv) -> None:
    ns = env.namespace
    await env.client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "vars", "namespace": ns},
                             "data": {"region": "eu-west-1", "tier": "gold", "inline": "from-configmap"}})
    await env.client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": ns},
                             "data": {"password": base64.b64encode(b"s3cret\n").decode(),
                                      "tier": base64.b64encode(b"platinum").decode()}})
    artifact = await env.publish({"cm.yaml": TEMPLATE})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, postBuild={
        "substitute": {"inline": "from-spec"},
        "substituteFrom": [{"kind": "ConfigMap", "name": "vars"}, {"kind": "Secret", "name": "creds"},
                           {"kind": "ConfigMap", "name": "missing", "optional": True}]}))
    await env.wait_ready(revision=artifact["revision"])
    rendered = await env.get("v1", "ConfigMap", "rendered")
    assert rendered["data"] == {"region": "eu-west-1", "tier": "platinum", "secret": "s3cret",
                                "inline": "from-spec", "escaped": "${kept}"}
    untouched = await env.get("v1", "ConfigMap", "untouched")
    assert untouched["data"] == {"raw": "${region}"}


async def test_missing_required_reference_fails_the_build(env: ControllerEnv) -> None:
    await env.publish({"cm.yaml": TEMPLATE})
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace, postBuild={
        "substituteFrom": [{"kind": "ConfigMap", "name": "absent"}]}))
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "BuildFailed"))
    message = condition_message(obj, "Ready")
    assert message == ("post build failed for 'ConfigMap.v1.[noGrp]/rendered': "
                       "substitute from 'ConfigMap/absent' error: configmaps \"absent\" not found"), message
    assert not await env.exists("v1", "ConfigMap", "rendered")


async def test_strict_mode_reports_unset_variable(env: ControllerEnv) -> None:
    ns = env.namespace
    await env.client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "vars", "namespace": ns},
                             "data": {"region": "eu"}})
    await env.publish({"cm.yaml": TEMPLATE})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, postBuild={
        "substitute": {"inline": "x"}, "substituteFrom": [{"kind": "ConfigMap", "name": "vars"}]}))
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "BuildFailed"))
    message = condition_message(obj, "Ready")
    assert message == ("post build failed for 'ConfigMap.v1.[noGrp]/rendered': envsubst error: "
                       'variable substitution failed: variable not set (strict mode): "password"')
