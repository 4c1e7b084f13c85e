"""Object-level workload identity for SOPS decryption (``spec.decryption.serviceAccountName``):
a TokenRequest for the ServiceAccount, exchanged with the key service — Vault/OpenBao Kubernetes
auth (``--sops-vault-configmap``) against the loopback Vault, AWS ``AssumeRoleWithWebIdentity``
against moto — the feature gate off, and a missing ServiceAccount, as upstream reports them."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from kustomize_controller.kustomize.sops.tree import EncryptionRules
from tests.fakes.vault import FakeVault, Role
from tests.integration.controller.conftest import ControllerEnv, condition, condition_message
from tests.unit.kustomize.sops.aws_moto import REGION, Moto, moto_server  # noqa: F401 - the fixture
from tests.unit.kustomize.sops.sopsgen import Recipe, encrypt_document

pytestmark = pytest.mark.integration

PLAIN = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "wi"}, "stringData": {"password": "hunter2"}}
# as a Flux user encrypts a Secret: only data/stringData, so kustomize can read the object
K8S_RULES = EncryptionRules(encrypted_regex="^(data|stringData)$")
GATE_MESSAGE = ("to use spec.decryption.serviceAccountName for decryption authentication please enable the "
                "ObjectLevelWorkloadIdentity feature gate in the controller")


@pytest.fixture
async def vault() -> AsyncIterator[FakeVault]:
    fake = FakeVault()
    fake.add_key("sops", "flux")
    await fake.start()
    yield fake
    await fake.stop()


def vault_document(vault: FakeVault) -> str:
    data_key = os.urandom(32)
    entry = {"vault_address": vault.url, "engine_path": "sops", "key_name": "flux",
             "created_at": "2024-11-12T13:33:42Z", "enc": vault.encrypt("sops", "flux", data_key)}
    recipe = Recipe(rules=K8S_RULES, extra_key_entries={"hc_vault": [entry]})
    return encrypt_document(PLAIN, "yaml", recipe, key=data_key).decode()


async def vault_setup(env: ControllerEnv, vault: FakeVault, *, service_account: str | None) -> None:
    ns = env.namespace
    vault.add_role("auth/kubernetes/login", f"{ns}_decryptor",
                   Role(service_account=f"{ns}:decryptor", audience=vault.url, policies=("sops/flux",)))
    config = yaml.safe_dump({"instances": [{"address": vault.url, "loginPath": "auth/kubernetes/login"}]})
    await env.client.create({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "vault-config", "namespace": ns}, "data": {"config.yaml": config}})
    if service_account:
        await env.client.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                 "metadata": {"name": service_account, "namespace": ns}})


def jwt_claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


async def test_vault_kubernetes_auth_with_the_decryption_service_account(
        env: ControllerEnv, vault: FakeVault, capfd: pytest.CaptureFixture[str]) -> None:
    ns = env.namespace
    await vault_setup(env, vault, service_account="decryptor")
    artifact = await env.publish({"secret.yaml": vault_document(vault)})
    await env.start(sops_vault_configmap="vault-config", feature_gates=env.gates(ObjectLevelWorkloadIdentity=True),
                    log_level="debug")
    await env.create(env.kustomization(targetNamespace=ns, decryption={
        "provider": "sops", "serviceAccountName": "decryptor"}))
    await env.wait_ready(revision=artifact["revision"])
    logs = capfd.readouterr()
    assert "server-side apply completed" in logs.out + logs.err  # the debug log is really captured
    secret = await env.get("v1", "Secret", "wi")
    assert base64.b64decode(secret["data"]["password"]).decode() == "hunter2"
    login = next(r for r in vault.requests if r.path == "/v1/auth/kubernetes/login")
    assert login.body["role"] == f"{ns}_decryptor"
    claims = jwt_claims(login.body["jwt"])
    assert claims["sub"] == f"system:serviceaccount:{ns}:decryptor"
    assert claims["aud"] == [vault.url]
    assert env.manager is not None
    labels = {"event_type": "cache_miss", "kind": "Kustomization", "name": "app", "namespace": ns,
              "operation": "decrypt_with_vault"}
    misses = env.manager.metrics.registry.get_sample_value("gotk_token_cache_events_total", labels)
    assert misses is not None and misses >= 1
    vault_token = next(r for r in vault.requests if r.path.endswith("/decrypt/flux")).headers["X-Vault-Token"]
    for secret_text in (login.body["jwt"], vault_token, "hunter2"):
        assert secret_text not in logs.out + logs.err
        for event in await env.events():
            assert secret_text not in event["message"]
    # the Kustomization's cache events go with it, as upstream
    await env.delete_ks()
    await env.wait_gone()
    for _ in range(100):
        if env.manager.metrics.registry.get_sample_value("gotk_token_cache_events_total", labels) is None:
            break
        await asyncio.sleep(0.1)
    assert env.manager.metrics.registry.get_sample_value("gotk_token_cache_events_total", labels) is None


async def test_gate_off_stalls_with_upstreams_message(env: ControllerEnv, vault: FakeVault) -> None:
    await vault_setup(env, vault, service_account="decryptor")
    await env.publish({"secret.yaml": vault_document(vault)})
    await env.start(sops_vault_configmap="vault-config")
    await env.create(env.kustomization(targetNamespace=env.namespace, decryption={
        "provider": "sops", "serviceAccountName": "decryptor"}))
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "FeatureGateDisabled"))
    assert condition_message(obj, "Ready") == GATE_MESSAGE
    assert condition(obj, "Stalled") == ("True", "FeatureGateDisabled")
    assert vault.requests == []
    assert not await env.exists("v1", "Secret", "wi")


async def test_missing_service_account_fails_the_build(env: ControllerEnv, vault: FakeVault) -> None:
    ns = env.namespace
    await vault_setup(env, vault, service_account=None)
    await env.publish({"secret.yaml": vault_document(vault)})
    await env.start(sops_vault_configmap="vault-config", feature_gates=env.gates(ObjectLevelWorkloadIdentity=True))
    await env.create(env.kustomization(targetNamespace=ns, decryption={
        "provider": "sops", "serviceAccountName": "decryptor"}))
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "BuildFailed"))
    # sops word-wraps each key's error in its UserError text, continuation lines start with "| "
    message = " ".join(condition_message(obj, "Ready").replace("| ", "").split())
    assert message.startswith("decryption failed for 'Secret.v1.[noGrp]/wi': "), message
    expected = (f"{vault.url}/v1/sops/keys/flux: FAILED - failed to issue Kubernetes token for Vault "
                f"authentication: failed to get service account '{ns}/decryptor': serviceaccounts \"decryptor\" "
                "not found")
    assert expected in message, message
    assert [r.path for r in vault.requests] == []


async def test_aws_kms_with_a_web_identity_from_the_service_account(
        env: ControllerEnv, moto_server: Moto, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.sts.models import sts_backends

    ns = env.namespace
    role = f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/flux-decrypt"
    await env.client.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {
        "name": "decryptor", "namespace": ns, "annotations": {"eks.amazonaws.com/role-arn": role}}})
    arn = moto_server.create_key()
    data_key = os.urandom(32)
    entry = moto_server.kms_entry(arn, data_key, {"cluster": "test"})
    recipe = Recipe(rules=K8S_RULES, extra_key_entries={"kms": [entry]})
    artifact = await env.publish({"secret.yaml": encrypt_document(PLAIN, "yaml", recipe, key=data_key).decode()})
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    from urllib.parse import parse_qs

    from kustomize_controller.kustomize.sops.keys import aws_credentials

    web_identities: list[str] = []
    real_call = aws_credentials.http.call

    async def spy(method: str, url: str, **kwargs: Any) -> Any:  # moto checks no token: we do
        form = parse_qs((kwargs.get("body") or b"").decode())
        if form.get("Action") == ["AssumeRoleWithWebIdentity"]:
            web_identities.append(form["WebIdentityToken"][0])
        return await real_call(method, url, **kwargs)

    monkeypatch.setattr(aws_credentials.http, "call", spy)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server.url)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    await env.start(feature_gates=env.gates(ObjectLevelWorkloadIdentity=True))
    await env.create(env.kustomization(targetNamespace=ns, decryption={
        "provider": "sops", "serviceAccountName": "decryptor"}))
    await env.wait_ready(revision=artifact["revision"])
    secret = await env.get("v1", "Secret", "wi")
    assert base64.b64decode(secret["data"]["password"]).decode() == "hunter2"
    sessions = {(r.session_name, r.role_arn) for backend in sts_backends[DEFAULT_ACCOUNT_ID].values()
                for r in backend.assumed_roles}
    assert (f"decryptor.{ns}.{REGION}.fluxcd.io", role) in sessions
    claims = jwt_claims(web_identities[0])
    assert claims["aud"] == ["sts.amazonaws.com"]
    assert claims["sub"] == f"system:serviceaccount:{ns}:decryptor"
