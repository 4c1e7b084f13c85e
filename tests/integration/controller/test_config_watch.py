"""Config watches (upstream ``--watch-configs-label-selector``): a change of a labelled ConfigMap or
Secret that a Kustomization substitutes from reconciles it at once; unlabelled ones are not watched."""

from __future__ import annotations

import base64

import pytest

from tests.integration.controller.conftest import ControllerEnv
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration

WATCH = {"reconcile.fluxcd.io/watch": "Enabled"}


async def wait_data(env: ControllerEnv, expected: dict[str, str]) -> None:
    for _ in range(300):
        if (await env.get("v1", "ConfigMap", "rendered")).get("data") == expected:
            return
        await __import__("asyncio").sleep(0.1)
    raise AssertionError(f"rendered ConfigMap never became {expected}")


async def test_labelled_config_changes_trigger_a_reconcile(env: ControllerEnv) -> None:
    ns = env.namespace
    await env.client.create({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "vars", "namespace": ns, "labels": WATCH},
                             "data": {"color": "blue"}})
    await env.client.create({"apiVersion": "v1", "kind": "Secret",
                             "metadata": {"name": "creds", "namespace": ns, "labels": WATCH},
                             "data": {"user": base64.b64encode(b"alice").decode()}})
    artifact = await env.publish({"cm.yaml": configmap("rendered", {"color": "${color}", "user": "${user}"})})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, interval="1h", postBuild={"substituteFrom": [
        {"kind": "ConfigMap", "name": "vars"}, {"kind": "Secret", "name": "creds"}]}))
    await env.wait_ready(revision=artifact["revision"])
    await wait_data(env, {"color": "blue", "user": "alice"})

    await env.client.patch("v1", "ConfigMap", "vars", ns, {"data": {"color": "green"}}, patch_type="merge")
    await wait_data(env, {"color": "green", "user": "alice"})
    await env.client.patch("v1", "Secret", "creds", ns, {"data": {"user": base64.b64encode(b"bob").decode()}},
                           patch_type="merge")
    await wait_data(env, {"color": "green", "user": "bob"})


async def test_optional_reference_created_later_triggers(env: ControllerEnv) -> None:
    ns = env.namespace
    artifact = await env.publish({"cm.yaml": configmap("rendered", {"color": "${color:=none}"})})
    await env.start()
    # an inline variable makes substitution run (it runs only when some variable is resolved)
    await env.create(env.kustomization(targetNamespace=ns, interval="1h", postBuild={
        "substitute": {"unused": "x"}, "substituteFrom": [{"kind": "ConfigMap", "name": "late", "optional": True}]}))
    await env.wait_ready(revision=artifact["revision"])
    await wait_data(env, {"color": "none"})
    await env.client.create({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "late", "namespace": ns, "labels": WATCH},
                             "data": {"color": "red"}})
    await wait_data(env, {"color": "red"})


async def test_custom_selector(env: ControllerEnv) -> None:
    ns = env.namespace
    await env.client.create({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "vars", "namespace": ns, "labels": {"team": "a"}},
                             "data": {"color": "blue"}})
    artifact = await env.publish({"cm.yaml": configmap("rendered", {"color": "${color}"})})
    await env.start(watch_configs_label_selector="team=a")
    await env.create(env.kustomization(targetNamespace=ns, interval="1h", postBuild={"substituteFrom": [
        {"kind": "ConfigMap", "name": "vars"}]}))
    await env.wait_ready(revision=artifact["revision"])
    await env.client.patch("v1", "ConfigMap", "vars", ns, {"data": {"color": "green"}}, patch_type="merge")
    await wait_data(env, {"color": "green"})
