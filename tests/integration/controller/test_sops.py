"""The SOPS hook point (upstream ``kustomization_decryptor_test.go``): with ``spec.decryption`` and the
age key in a Secret, the decrypted Secret is applied; without it, upstream's guard message and nothing
applied. Plaintext never appears in events or in the status."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.integration.controller.conftest import ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration

SOPS_DATA = Path(__file__).resolve().parents[3].parent / "shared" / "reference" / "testdata" / "sops"
if not SOPS_DATA.is_dir():  # pragma: no cover - the shared reference is a sibling of the clone
    pytest.skip(f"SOPS test data not found at {SOPS_DATA}", allow_module_level=True)

PLAINTEXT = "value"


async def test_decrypted_secret_is_applied(env: ControllerEnv, capfd: pytest.CaptureFixture[str]) -> None:
    ns = env.namespace
    key = (SOPS_DATA / "keys" / "age.txt").read_bytes()
    await env.client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sops-keys", "namespace": ns},
                             "data": {"identity.agekey": base64.b64encode(key).decode()}})
    artifact = await env.publish({"secret.yaml": (SOPS_DATA / "algorithms" / "age.yaml").read_text(),
                                  "cm.yaml": configmap("plain")})
    await env.start(log_level="debug")
    await env.create(env.kustomization(targetNamespace=ns, decryption={
        "provider": "sops", "secretRef": {"name": "sops-keys"}}))
    obj = await env.wait_ready(revision=artifact["revision"])
    logs = capfd.readouterr()
    assert "server-side apply completed" in logs.out + logs.err  # the debug log is really captured
    encoded = base64.b64encode(PLAINTEXT.encode()).decode()
    assert encoded not in logs.out + logs.err
    assert f'"{PLAINTEXT}"' not in logs.out + logs.err
    secret = await env.get("v1", "Secret", "age")
    assert base64.b64decode(secret["data"]["key"]).decode() == PLAINTEXT
    assert "sops" not in secret
    for event in await env.events():
        assert PLAINTEXT not in event["message"]
    assert f"{ns}_age__Secret" in [e["id"] for e in obj["status"]["inventory"]["entries"]]


async def test_encrypted_secret_without_decryption_is_refused(env: ControllerEnv) -> None:
    ns = env.namespace
    await env.publish({"secret.yaml": (SOPS_DATA / "algorithms" / "age.yaml").read_text(),
                       "cm.yaml": configmap("plain")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") is not None
                             and condition(o, "Ready")[0] == "False")  # type: ignore[index]
    assert condition_message(obj, "Ready") == (
        f"Secret/{ns}/age is SOPS encrypted, configuring decryption is required for this secret to be reconciled")
    assert not await env.exists("v1", "Secret", "age")
    assert not await env.exists("v1", "ConfigMap", "plain")


async def test_wrong_key_fails_without_leaking(env: ControllerEnv) -> None:
    ns = env.namespace
    key = (SOPS_DATA / "keys" / "age-global.txt").read_bytes()
    await env.client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sops-keys", "namespace": ns},
                             "data": {"identity.agekey": base64.b64encode(key).decode()}})
    await env.publish({"secret.yaml": (SOPS_DATA / "algorithms" / "age.yaml").read_text()})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, decryption={
        "provider": "sops", "secretRef": {"name": "sops-keys"}}))
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "BuildFailed"))
    message = condition_message(obj, "Ready")
    assert message.startswith("decryption failed for 'Secret.v1.[noGrp]/age': "), message
    assert "cannot get sops data key: Failed to get the data key required to decrypt the SOPS file." in message
    assert ("age: identity did not match any of the recipients: incorrect\n      | identity for recipient block"
            in message), message
    assert message.endswith("at least one key has to be successful,\nbut none were."), message
    assert not await env.exists("v1", "Secret", "age")


async def test_global_age_key_from_the_runtime_namespace(env: ControllerEnv) -> None:
    ns = env.namespace
    key = (SOPS_DATA / "keys" / "age.txt").read_bytes()
    await env.client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sops-age", "namespace": ns},
                             "data": {"identity.agekey": base64.b64encode(key).decode()}})
    artifact = await env.publish({"secret.yaml": (SOPS_DATA / "algorithms" / "age.yaml").read_text()})
    await env.start(sops_age_secret="sops-age")
    await env.create(env.kustomization(targetNamespace=ns, decryption={"provider": "sops"}))
    await env.wait_ready(revision=artifact["revision"])
    secret = await env.get("v1", "Secret", "age")
    assert base64.b64decode(secret["data"]["key"]).decode() == PLAINTEXT
