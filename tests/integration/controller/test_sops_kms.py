"""SOPS with AWS KMS end to end: a Kustomization whose Secret's data key is held by KMS (moto in
server mode on loopback) becomes Ready with the credentials in the decryption Secret, with the
controller's own web identity, and fails with upstream's message for a wrong encryption context.
The controller runs in this process, so its environment (the KMS/STS endpoint) is this process'."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.controller.conftest import ControllerEnv, condition, condition_message
from tests.unit.kustomize.sops.aws_moto import STATIC_SECRET, STATIC_SECRET_YAML, Moto, recipe
from tests.unit.kustomize.sops.aws_moto import moto_server as moto_server
from tests.unit.kustomize.sops.sopsgen import AgeKey, encrypt_document

pytestmark = pytest.mark.integration

PLAIN = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kms"}, "stringData": {"key": "kms-value"}}


@pytest.fixture
def aws_env(moto_server: Moto, monkeypatch: pytest.MonkeyPatch) -> Iterator[Moto]:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server.url)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    yield moto_server


async def _keys_secret(env: ControllerEnv, data: dict[str, bytes]) -> None:
    await env.client.create({"apiVersion": "v1", "kind": "Secret",
                             "metadata": {"name": "sops-keys", "namespace": env.namespace},
                             "data": {k: base64.b64encode(v).decode() for k, v in data.items()}})


async def _decrypting_ks(env: ControllerEnv, secret: bool = True) -> None:
    decryption: dict[str, object] = {"provider": "sops"}
    if secret:
        decryption["secretRef"] = {"name": "sops-keys"}
    await env.create(env.kustomization(targetNamespace=env.namespace, decryption=decryption))


async def test_kms_secret_decrypted_with_credentials_from_the_secret(env: ControllerEnv, aws_env: Moto) -> None:
    arn = aws_env.create_key()
    await _keys_secret(env, {"sops.aws-kms": STATIC_SECRET_YAML})
    artifact = await env.publish({"secret.yaml": aws_env.document(arn, context={"cluster": "prod"}).decode()})
    await env.start()
    await _decrypting_ks(env)
    await env.wait_ready(revision=artifact["revision"])
    secret = await env.get("v1", "Secret", "kms")
    assert base64.b64decode(secret["data"]["key"]).decode() == "kms-value"


async def test_kms_with_the_controllers_web_identity(
    env: ControllerEnv, aws_env: Moto, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2ln")
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/kustomize-controller")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
    arn = aws_env.create_key()
    artifact = await env.publish({"secret.yaml": aws_env.document(arn, role="").decode()})
    await env.start()
    await _decrypting_ks(env, secret=False)
    await env.wait_ready(revision=artifact["revision"])
    secret = await env.get("v1", "Secret", "kms")
    assert base64.b64decode(secret["data"]["key"]).decode() == "kms-value"


async def test_kms_with_the_controllers_environment_keys_and_an_age_key_next_to_it(
    env: ControllerEnv, aws_env: Moto, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIACONTROLLER")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "controller-secret")
    arn = aws_env.create_key()
    data_key = os.urandom(32)
    other_age = AgeKey.generate()  # a key nobody has: KMS must do it
    doc = encrypt_document(PLAIN, "yaml", recipe(
        age_recipients=[other_age.recipient],
        extra_key_entries={"kms": [aws_env.kms_entry(arn, data_key, {"a": "b"})]}), key=data_key)
    artifact = await env.publish({"secret.yaml": doc.decode()})
    await env.start()
    await _decrypting_ks(env, secret=False)
    await env.wait_ready(revision=artifact["revision"])
    assert await env.exists("v1", "Secret", "kms")


async def test_wrong_encryption_context_fails_with_upstreams_message(env: ControllerEnv, aws_env: Moto) -> None:
    arn = aws_env.create_key()
    await _keys_secret(env, {"sops.aws-kms": STATIC_SECRET_YAML})
    doc = aws_env.document(arn, context={"cluster": "prod"}).replace(b"cluster: prod", b"cluster: dev")
    await env.publish({"secret.yaml": doc.decode()})
    await env.start()
    await _decrypting_ks(env)
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "BuildFailed"))
    message = condition_message(obj, "Ready")
    assert message.startswith(
        "decryption failed for 'Secret.v1.[noGrp]/kms': failed to decrypt and format "
        f"'{env.namespace}/kms' Secret data: cannot get sops data key: Failed to get the data key required"), message
    assert f"  {arn}|cluster:dev: FAILED\n    - | failed to decrypt sops data key with AWS KMS:" in message, message
    assert "InvalidCiphertextException" in message, message
    assert STATIC_SECRET not in message
    assert not await env.exists("v1", "Secret", "kms")
    for event in await env.events():
        assert STATIC_SECRET not in event["message"]
